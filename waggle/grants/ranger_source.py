"""The current policies of a Ranger Hive service (:class:`RangerPolicies`), kept up to date: read from a policy
file again when its modification time changes, or polled from Ranger admin's plugin download
(``GET {url}/service/plugins/policies/download/{service}``), both every ``poll_seconds`` in a background loop
(:mod:`waggle.loops`).

Ranger admin says 304 when the policies are those of ``lastKnownVersion`` (or of the ``ETag`` sent back in
``If-None-Match``), 404 when it has no such service. Whatever goes wrong (the service missing, Ranger admin
unreachable or answering an error, a document waggle cannot read) is logged and the last policies stay. Every
request has a timeout. With ``cache_file``, the last document downloaded is kept there, and read at start when
Ranger admin cannot be reached. ``urllib.request`` is cooperative under gevent's monkey-patching; ``ca_file``
verifies an https Ranger admin. Kerberos (the ``/secure/`` download) is not spoken.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from waggle.common.logging import get_logger
from waggle.config.grants_model import RangerConfig
from waggle.grants.ranger import RangerPolicyError, RangerSource
from waggle.loops import Loop, Loops

log = get_logger("waggle.grants.ranger")

#: how long a request to Ranger admin may take, in seconds
REQUEST_TIMEOUT = 10.0


class RangerPolicies:
    """The current :class:`~waggle.grants.ranger.RangerSource` of ``config`` (None until policies were read).

    ``config.url`` set: polled from Ranger admin (``policy_file`` is then not read); else ``config.policy_file``.
    """

    def __init__(self, config: RangerConfig, *, timeout: float = REQUEST_TIMEOUT,
                 plugin_host: str | None = None) -> None:
        if not config.url and not config.policy_file:
            raise ValueError("authorization.ranger: neither 'url' nor 'policy-file' is set")
        self.config = config
        self.timeout = timeout
        self._source: RangerSource | None = None
        self._mtime: tuple[int, int] | None = None  # the policy file's (mtime_ns, size) when it was read
        self._etag: str | None = None
        self._activated_ms = 0  # when the policies were last taken in (Ranger's lastActivationTime)
        self._loops: Loops | None = None
        self._plugin_id = f"waggle@{plugin_host or socket.gethostname()}-{config.service}"
        self._ssl = (ssl.create_default_context(cafile=config.ca_file)
                     if config.url and config.url.lower().startswith("https:") else None)

    def current(self) -> RangerSource | None:
        """The policies as last read (None: none read yet)."""
        return self._source

    @property
    def where(self) -> str:
        """Where the policies come from, as messages name it."""
        return self.config.url or str(self.config.policy_file)

    def load(self) -> RangerSource | None:
        """The first read, before serving: a policy file that cannot be read raises (:class:`OSError`,
        :class:`~waggle.grants.ranger.RangerPolicyError`, :class:`ValueError` for JSON); from Ranger admin, a
        download that fails is logged and the cache file (if any) read instead."""
        if not self.config.url:
            self._read_file(raise_errors=True)
        elif not self.refresh() and self._source is None:
            self._read_cache()
        return self._source

    def refresh(self) -> bool:
        """One round: the policy file read again if it changed, or one poll of Ranger admin. True when new
        policies were taken in. Never raises: what fails is logged, and the last policies stay."""
        if self.config.url:
            return self._poll()
        return self._read_file(raise_errors=False)

    def start(self) -> None:
        """Polls in the background every ``poll_seconds`` (after a first read, if :meth:`load` made none)."""
        if self._loops is not None:
            return
        first_made = self._source is not None
        self._loops = Loops([Loop("ranger.refresh_failed", self._round, lambda: self.config.poll_seconds,
                                  wait_first=first_made)])
        self._loops.start()

    def _round(self) -> None:
        self.refresh()

    def stop(self) -> None:
        """Ends the background polls."""
        if self._loops is not None:
            self._loops.close()
            self._loops = None

    # --- the policy file

    def _read_file(self, raise_errors: bool) -> bool:
        path = Path(str(self.config.policy_file))
        try:
            info = path.stat()
            stamp = (info.st_mtime_ns, info.st_size)
            if stamp == self._mtime:
                return False
            source = RangerSource.from_document(json.loads(path.read_bytes()), self.config.service, str(path))
        except (OSError, ValueError) as exc:  # RangerPolicyError and JSON's errors are ValueErrors
            if raise_errors:
                raise
            log.error("ranger.policy_file_unread", file=str(path), error=str(exc))
            return False
        self._mtime = stamp
        self._take(source, "file")
        return True

    # --- Ranger admin

    def download_url(self) -> str:
        """The plugin download's URL, with what the policies now are (``lastKnownVersion`` -1 for none)."""
        version = self._source.version if self._source is not None else None
        query = urllib.parse.urlencode({
            "lastKnownVersion": -1 if version is None else version, "lastActivationTime": self._activated_ms,
            "pluginId": self._plugin_id, "supportsPolicyDeltas": "false"})
        service = urllib.parse.quote(self.config.service, safe="")
        return f"{str(self.config.url).rstrip('/')}/service/plugins/policies/download/{service}?{query}"

    def _poll(self) -> bool:
        url = self.download_url()
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self._etag:
            request.add_header("If-None-Match", self._etag)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._ssl) as response:
                status, body, etag = response.status, response.read(), response.headers.get("ETag")
        except urllib.error.HTTPError as exc:
            if exc.code == 304:
                log.debug("ranger.unchanged", url=self.config.url, version=self._version())
            elif exc.code == 404:
                log.warning("ranger.service_missing", url=self.config.url, service=self.config.service)
            else:
                log.warning("ranger.download_failed", url=self.config.url, status=exc.code, reason=str(exc.reason))
            return False
        except (OSError, ValueError) as exc:  # URLError, timeouts, TLS; ValueError: a malformed URL
            log.warning("ranger.unreachable", url=self.config.url, error=str(exc))
            return False
        if status == 204 or not body.strip():
            log.debug("ranger.unchanged", url=self.config.url, version=self._version())
            return False
        try:
            doc = json.loads(body)
            source = RangerSource.from_document(doc, self.config.service, str(self.config.url))
        except ValueError as exc:
            log.error("ranger.bad_policies", url=self.config.url, error=str(exc))
            return False
        self._etag = etag
        self._take(source, "ranger admin")
        self._write_cache(body)
        return True

    def _version(self) -> int | None:
        return self._source.version if self._source is not None else None

    # --- the cache file

    def _read_cache(self) -> None:
        cache = self.config.cache_file
        if not cache or not os.path.exists(cache):
            return
        try:
            source = RangerSource.from_document(json.loads(Path(cache).read_bytes()), self.config.service, cache)
        except (OSError, ValueError) as exc:
            log.error("ranger.cache_unread", file=cache, error=str(exc))
            return
        self._take(source, "cache file")

    def _write_cache(self, body: bytes) -> None:
        cache = self.config.cache_file
        if not cache:
            return
        try:
            folder = os.path.dirname(os.path.abspath(cache))
            with tempfile.NamedTemporaryFile("wb", dir=folder, prefix=".ranger-", delete=False) as out:
                try:
                    out.write(body)
                except OSError:
                    os.unlink(out.name)
                    raise
            os.replace(out.name, cache)
        except OSError as exc:
            log.warning("ranger.cache_unwritten", file=cache, error=str(exc))

    def _take(self, source: RangerSource, origin: str) -> None:
        self._source = source
        self._activated_ms = int(time.time() * 1000)
        log.info("ranger.policies_loaded", service=self.config.service, origin=origin, where=source.where,
                 version=source.version, policies=len(source))


__all__ = ["REQUEST_TIMEOUT", "RangerPolicies", "RangerPolicyError"]
