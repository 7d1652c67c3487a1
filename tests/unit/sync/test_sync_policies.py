"""A sync file read as the service's policies: names, schedules, the service's settings, and problems that name
the file, the key and the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from waggle.sync.policies import CRON, EVERY, FOLLOW, load_policies
from waggle.sync.runner import SyncConfigError, load_sync_file

HEAD = "federation-config: fed.yml\nsource: analytics\n"


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "sync.yml"
    path.write_text(HEAD + text)
    return str(path)


def problems(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(SyncConfigError) as err:
        load_policies(path)
    return "\n".join(err.value.problems)


def test_policies_follow_every_cron_and_enabled(tmp_path):
    f = load_policies(write(tmp_path, """
follow: true
http-port: 0
poll-interval-max: 5s
execution-window: 2m
lease-seconds: 30
jobs:
  - {name: live, tables: "sales.*"}
  - {name: hourly, tables: "web.*", every: 1h}
  - {name: nightly, tables: "ops.*", cron: "0 2 * * *", enabled: false, mode: copy}
"""))
    live, hourly, nightly = f.policies
    assert (live.kind, live.follow, live.enabled) == (FOLLOW, True, True)
    assert (hourly.kind, hourly.every, hourly.follow) == (EVERY, 3600.0, False)
    assert (nightly.kind, nightly.cron, nightly.enabled, nightly.spec.mode) == (CRON, "0 2 * * *", False, "copy")
    assert (f.http_port, f.poll_interval_max, f.execution_window, f.lease_seconds) == (0, 5.0, 120.0, 30.0)
    assert live.spec.patterns == ("sales.*",) and live.spec.source == "analytics"
    assert f.policy("hourly") is hourly and f.policy("nope") is None


def test_defaults_of_the_service_settings(tmp_path):
    f = load_policies(write(tmp_path, "jobs:\n  - {name: a, tables: 's.*', follow: true}\n"))
    assert (f.http_port, f.poll_interval_max, f.execution_window, f.lease_seconds, f.page_size) == \
        (9184, 1.0, 60.0, 60.0, 1000)


def test_an_unchanged_definition_is_an_equal_policy(tmp_path):
    text = "jobs:\n  - {name: a, tables: 's.*', every: 30m}\n"
    assert load_policies(write(tmp_path, text)).policies == load_policies(write(tmp_path, text)).policies
    other = load_policies(write(tmp_path, text.replace("30m", "31m"))).policies
    assert other != load_policies(write(tmp_path, text)).policies


def test_the_batch_run_reads_the_same_file(tmp_path):
    run = load_sync_file(write(tmp_path, "jobs:\n  - {name: a, tables: 's.*', cron: '*/5 * * * *'}\n"))
    assert run.specs[0].patterns == ("s.*",)


@pytest.mark.parametrize("jobs, expected", [
    ("  - {tables: 's.*', follow: true}", r"key 'jobs[0].name' is required with --follow"),
    ("  - {name: 'a b', tables: 's.*', follow: true}", "key 'jobs[0].name': invalid value 'a b'"),
    ("  - {name: a, tables: 's.*', follow: true}\n  - {name: a, tables: 't.*', follow: true}",
     "key 'jobs[1].name': invalid value 'a': another job has this name"),
    ("  - {name: a, tables: 's.*'}", "key 'jobs[0].follow' is required with --follow"),
    ("  - {name: a, tables: 's.*', every: soon}", "key 'jobs[0].every': invalid value 'soon': expected a duration"),
    ("  - {name: a, tables: 's.*', every: 0s}", "key 'jobs[0].every': invalid value '0s': expected at least 1s"),
    ("  - {name: a, tables: 's.*', cron: '* * *'}", "key 'jobs[0].cron': invalid value '* * *': expected five "
     "cron fields"),
    ("  - {name: a, tables: 's.*', cron: '61 * * * *'}", "minute: 61 is out of range 0..59"),
    ("  - {name: a, tables: 's.*', cron: '0 0 30 feb *'}", "the schedule never fires"),
    ("  - {name: a, tables: 's.*', every: 1h, cron: '* * * * *'}", "'every' or 'cron', not both"),
    ("  - {name: a, tables: 's.*', follow: true, every: 1h}", "key 'jobs[0].every': invalid value 3600.0: "
     "'follow: true' is continuous"),
    ("  - {name: a, tables: 's.*', follow: true, enabled: maybe}", "key 'jobs[0].enabled': invalid value 'maybe'"),
    ("  - {name: a, tables: 'nodot', follow: true}", "key 'jobs[0].tables': invalid value 'nodot'"),
])
def test_problems_name_file_key_and_value(tmp_path, jobs, expected):
    said = problems(tmp_path, f"jobs:\n{jobs}\n")
    assert expected in said
    assert said.startswith(str(tmp_path / "sync.yml") + ": ")


@pytest.mark.parametrize("top, expected", [
    ("http-port: 70000", "key 'http-port': invalid value 70000: expected an integer between 0 and 65535"),
    ("poll-interval-max: 0.01", "key 'poll-interval-max': invalid value '0.01': expected at least 0.1s"),
    ("execution-window: never", "key 'execution-window': invalid value 'never'"),
    ("follow: sometimes", "key 'follow': invalid value 'sometimes'"),
])
def test_top_level_problems(tmp_path, top, expected):
    assert expected in problems(tmp_path, f"{top}\njobs:\n  - {{name: a, tables: 's.*', every: 1h}}\n")


def test_a_top_level_follow_is_every_jobs_default_and_a_schedule_wins(tmp_path):
    f = load_policies(write(tmp_path, "follow: true\njobs:\n  - {name: a, tables: 's.*', every: 10m}\n"
                                      "  - {name: b, tables: 't.*', follow: false, cron: '0 * * * *'}\n"))
    assert [p.kind for p in f.policies] == [EVERY, CRON]


def test_the_batch_runs_flags_give_one_continuous_policy_named_from_its_tables() -> None:
    from waggle.sync.policies import COMMAND_LINE, command_line_policy, policy_name_of

    assert policy_name_of("web.*") == "web"
    assert policy_name_of("web.clicks,web.visits") == "web_clicks_web_visits"
    assert policy_name_of("Sales.Orders_2024") == "sales_orders_2024"
    assert policy_name_of("**") == "policy"
    pf = command_line_policy("fed.yml", "analytics", "web.clicks", None, 0, **{"mode": "copy",
                                                                               "target-database": "web_copy",
                                                                               "partition-filter": None})
    (policy,) = pf.policies
    assert (pf.path, pf.http_port, pf.run.federation_config) == (COMMAND_LINE, 0, str(Path.cwd() / "fed.yml"))
    assert (policy.name, policy.follow, policy.spec.source, policy.spec.mode, policy.spec.target_database) == \
        ("web_clicks", True, "analytics", "copy", "web_copy")
    named = command_line_policy("fed.yml", "analytics", "web.clicks", "clicks")
    assert named.policies[0].name == "clicks" and named.http_port == 9184  # the sync file's default
    with pytest.raises(SyncConfigError) as bad:
        command_line_policy("fed.yml", "analytics", "web.clicks", "no spaces please")
    assert any(p.startswith(COMMAND_LINE) and "name" in p for p in bad.value.problems), bad.value.problems
