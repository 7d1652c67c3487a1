"""The one walker of Thrift specs: fields, exception fields, plans over a question, mirrors, paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from thrift.Thrift import TMessageType, TType

from waggle.config.model import Limits, ProtocolKind, WireFormat
from waggle.hms import specs
from waggle.hms.decode import decode_message
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as H
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.wire import Wire

LIMITS = Limits(1 << 30, 1 << 26, 10_000_000)
WAGGLE = Path(__file__).resolve().parents[3] / "waggle"


# -- fields -----------------------------------------------------------------------------------------------------
def test_fields_in_id_order_with_their_struct_classes():
    assert [f.attr for f in specs.fields(T.Partition)][:3] == ["values", "dbName", "tableName"]
    assert [f.fid for f in specs.fields(T.Partition)] == sorted(f.fid for f in specs.fields(T.Partition))
    sd = specs.field_named(T.Partition, "sd")
    assert sd is not None and sd.struct is T.StorageDescriptor and sd.ttype == TType.STRUCT
    keys = specs.field_named(T.Table, "partitionKeys")
    assert keys is not None and keys.struct is T.FieldSchema  # a list of structs: its elements' class
    db = specs.field_by_id(T.Partition, 2)
    assert db is not None and db.attr == "dbName" and db.is_string and db.struct is None
    values = specs.field_named(T.Partition, "values")
    assert values is not None and values.is_string_list and not values.is_string
    parameters = specs.field_named(T.Partition, "parameters")
    assert parameters is not None and parameters.struct is None  # a map is no struct
    assert specs.field_named(T.Partition, "nope") is None and specs.field_by_id(T.Partition, 999) is None


def test_anything_that_is_not_a_struct_has_no_fields():
    assert specs.fields(int) == () and specs.fields(str) == ()
    assert not specs.is_struct(int) and specs.is_struct(T.Partition)
    assert specs.is_struct(H.get_all_functions_args)  # a struct with no fields is still a struct
    assert specs.fields(H.get_all_functions_args) == ()


def test_exception_fields_and_the_exception_a_result_carries():
    declared = specs.exception_fields(H.get_table_result)
    assert [(f.attr, f.struct) for f in declared] == [("o1", T.MetaException), ("o2", T.NoSuchObjectException)]
    assert specs.raised(H.get_table_result(success=T.Table())) is None
    missing = T.NoSuchObjectException(message="no such table")
    assert specs.raised(H.get_table_result(o2=missing)) is missing
    assert specs.exception_fields(H.get_table_args) == ()


def test_codec_and_declare():
    class Pair:
        def __init__(self, left: str | None = None, right: int | None = None) -> None:
            self.left, self.right = left, right

    specs.declare(Pair, (None, (1, TType.STRING, "left", "UTF8", None), (2, TType.I32, "right", None, None)))
    assert [f.attr for f in specs.fields(Pair)] == ["left", "right"]
    assert specs.codec(Pair)[0] is Pair and len(specs.codec(Pair)[1]) == 3
    raw = Wire(None, WireFormat(), LIMITS).encode("x", TMessageType.REPLY, 1, Pair("a", 7))  # type: ignore[arg-type]
    _, back = decode_message(raw, ProtocolKind.BINARY, Pair, LIMITS)
    assert (back.left, back.right) == ("a", 7)


# -- plans ------------------------------------------------------------------------------------------------------
class Leaf(specs.Mirror):
    pass


class Other(specs.Mirror):
    pass


class Node(specs.Mirror):
    pass


specs.declare(Leaf, (None, (1, TType.STRING, "name", "UTF8", None), (2, TType.STRING, "note", "UTF8", None)))
specs.declare(Other, (None, (1, TType.I32, "count", None, None)))
specs.declare(Node, (
    None,
    (1, TType.STRING, "name", "UTF8", None),
    (2, TType.LIST, "children", (TType.STRUCT, [Node, None], False), None),  # recursive
    (3, TType.MAP, "tags", (TType.STRING, "UTF8", TType.STRUCT, [Leaf, None], False), None),
    (4, TType.STRUCT, "other", [Other, None], None),
    (5, TType.STRING, "blob", "UTF8", None),
))


def named(_cls: type, field: specs.Field) -> str | None:
    return _cls.__name__ if field.attr == "name" and field.is_string else None


def test_a_plan_keeps_the_answering_fields_and_the_children_leading_to_them():
    plans: specs.Plans[str] = specs.Plans(named)
    plan = plans.plan(Node)  # terminates on the recursive type
    assert plan is not None
    assert [(f.attr, what) for f, what in plan.own] == [("name", "Node")]
    children = {f.attr: walk for f, walk in plan.children}
    assert "other" not in children and "blob" not in children  # nothing inside answers
    tags = children["tags"]
    assert tags.kind == TType.MAP and tags.key is None
    assert tags.element is not None and tags.element.plan is plans.plan(Leaf)
    assert plans.reaches(Node) and plans.reaches(Leaf) and not plans.reaches(Other)
    assert plans.plan(Node) is plan  # cached


def test_visit_finds_the_answering_fields_of_a_value():
    plans: specs.Plans[str] = specs.Plans(named)
    value = Node(name="root", tags={"a": Leaf(name="leaf-a", note="x"), "b": Leaf(note="y")},
                 other=Other(count=1), blob="name")
    seen: list[tuple[str, Any]] = []
    plans.visit(value, lambda parent, field, what: seen.append((what, getattr(parent, field.attr, None))))
    assert seen == [("Node", "root"), ("Leaf", "leaf-a"), ("Leaf", None)]  # set or not, each field is visited
    plans.visit(Other(count=2), lambda *_: seen.append(("never", None)))
    assert seen[-1] != ("never", None)


def test_a_plan_over_hive_structs_skips_what_cannot_hold_an_answer():
    plans: specs.Plans[bool] = specs.Plans(lambda _c, f: True if f.attr == "dbName" and f.is_string else None)
    assert not plans.reaches(T.StorageDescriptor)
    result = plans.plan(H.get_partitions_result)
    assert result is not None and [f.attr for f, _ in result.children] == ["success"]
    partition = plans.plan(T.Partition)
    assert partition is not None
    assert [f.attr for f, _ in partition.own] == ["dbName"]
    assert "sd" not in {f.attr for f, _ in partition.children}


def test_mirrors_keep_only_the_planned_fields():
    plans: specs.Plans[bool] = specs.Plans(lambda _c, f: True if f.attr == "dbName" and f.is_string else None)
    mirrors = specs.Mirrors(plans)
    mirror = mirrors.mirror(H.get_partitions_result)
    assert mirror is not None and mirror.__name__ == "get_partitions_result"
    assert mirrors.mirror(H.get_partitions_result) is mirror
    assert [f.attr for f in specs.fields(mirror)] == ["success"]
    assert mirrors.mirror(T.StorageDescriptor) is None
    parts = [T.Partition(values=["1"], dbName="sales", tableName="t", sd=T.StorageDescriptor(location="x"))]
    raw = Wire(None, WireFormat(), LIMITS).encode(  # type: ignore[arg-type]
        "get_partitions", TMessageType.REPLY, 1, H.get_partitions_result(success=parts))
    _, thin = decode_message(raw, ProtocolKind.BINARY, mirror, LIMITS)
    assert [p.dbName for p in thin.success] == ["sales"]
    assert not hasattr(thin.success[0], "sd") and not hasattr(thin.success[0], "tableName")


# -- paths ------------------------------------------------------------------------------------------------------
def db_name(cls: type, field: specs.Field) -> str | None:
    return cls.__name__ if field.attr == "dbName" else None


def test_paths_shallowest_first_within_the_depth_bound():
    deep = specs.paths(T.GetTableResult, db_name, 3)
    assert deep == (
        (("table", "dbName"), "Table"),
        (("table", "creationMetadata", "dbName"), "CreationMetadata"),
        (("table", "colStats", "statsDesc", "dbName"), "ColumnStatisticsDesc"),
    )
    assert specs.paths(T.GetTableResult, db_name, 2) == deep[:2]
    assert specs.paths(T.GetTableResult, db_name, 0) == ()
    own = ((("given",), "first"),)
    assert specs.paths(T.GetTableResult, db_name, 1, own) == (*own, deep[0])


def test_paths_do_not_loop_on_a_recursive_type():
    found = specs.paths(Node, named, 5)
    assert found[0] == (("name",), "Node")
    assert (("children", "name"), "Node") not in found  # a struct type is not revisited on one path


# -- the rule ---------------------------------------------------------------------------------------------------
def test_specs_are_read_in_at_most_three_modules():
    readers = {str(p.relative_to(WAGGLE)) for p in WAGGLE.rglob("*.py")
               if "gen" not in p.relative_to(WAGGLE).parts and "thrift_spec" in p.read_text()}
    assert "hms/specs.py" in readers
    assert len(readers) <= 3, sorted(readers)
