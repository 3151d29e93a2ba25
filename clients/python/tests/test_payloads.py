"""The TypedDicts of interlock.payloads have the keys of the JSON Schemas
they type (docs/schema, httpapi/openapi.json), so they cannot drift."""

from __future__ import annotations

import json
import os
import typing
import unittest
from pathlib import Path
from typing import Any, Dict, Tuple

from interlock import payloads

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = ROOT / "docs" / "schema"
OPENAPI = ROOT / "httpapi" / "openapi.json"

# Each TypedDict, and where its schema is: a file of docs/schema and a
# JSON pointer in it, or "openapi" and a component's name.
TYPED: Dict[str, Tuple[str, str]] = {
    "ToolRequest": ("tool-requested.json", ""),
    "Decided": ("decided.json", ""),
    "AskRequest": ("ask-requested.json", ""),
    "AskInterrupt": ("ask-requested.json", "/properties/interrupt"),
    "OnTimeout": ("ask-requested.json", "/properties/interrupt/properties/onTimeout"),
    "Answered": ("answered.json", ""),
    "Interrupted": ("interrupted.json", ""),
    "Pending": ("pending.json", ""),
    "CloudEvent": ("cloudevent.json", ""),
    "Question": ("defs.json", "/$defs/question"),
    "Option": ("defs.json", "/$defs/option"),
    "Vote": ("defs.json", "/$defs/vote"),
    "Policy": ("defs.json", "/$defs/policy"),
    "KeyArg": ("defs.json", "/$defs/keyArg"),
    "Problem": ("openapi", "Problem"),
    "GateAnswer": ("openapi", "GateAnswer"),
    "AskAnswer": ("openapi", "AskAnswer"),
    "InterruptPage": ("openapi", "InterruptPage"),
}

# Each Literal, and the enum it spells.
ENUMS: Dict[str, Tuple[str, str]] = {
    "Kind": ("defs.json", "/$defs/kind"),
    "Verdict": ("defs.json", "/$defs/verdict"),
    "Decision": ("decided.json", "/properties/decision"),
    "AskStatus": ("answered.json", "/properties/status"),
}


def schema_at(file: str, pointer: str) -> Dict[str, Any]:
    if file == "openapi":
        return json.loads(OPENAPI.read_text())["components"]["schemas"][pointer]  # type: ignore[no-any-return]
    node: Any = json.loads((SCHEMAS / file).read_text())
    for part in pointer.split("/")[1:]:
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node  # type: ignore[no-any-return]


class PayloadsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        if SCHEMAS.is_dir() and OPENAPI.is_file():
            return
        why = f"the schemas are not at {SCHEMAS} and {OPENAPI}: run the tests in the repository's clients/python"
        if os.environ.get("INTERLOCK_TEST_REQUIRED"):
            raise RuntimeError(why)
        raise unittest.SkipTest(why)

    def test_typed_dicts_have_the_keys_of_their_schemas(self) -> None:
        for name, (file, pointer) in TYPED.items():
            with self.subTest(name=name, schema=f"{file}#{pointer}"):
                schema = schema_at(file, pointer)
                typed = getattr(payloads, name)
                self.assertEqual(sorted(typed.__annotations__), sorted(schema["properties"]), f"keys of {name}")
                self.assertEqual(sorted(typed.__required_keys__), sorted(schema.get("required", [])), f"required keys of {name}")

    def test_every_schema_of_the_wire_the_client_meets_is_typed(self) -> None:
        index = json.loads((SCHEMAS / "index.json").read_text())
        files = {s["file"] for s in index["schemas"]}
        typed = {file for file, _ in TYPED.values()}
        # What the HTTP API hands a client, or takes from it.
        for file in ("tool-requested.json", "decided.json", "ask-requested.json", "answered.json",
                     "interrupted.json", "pending.json", "cloudevent.json"):
            self.assertIn(file, files, f"docs/schema/index.json no longer lists {file}")
            self.assertIn(file, typed)

    def test_literals_spell_their_enums(self) -> None:
        for name, (file, pointer) in ENUMS.items():
            with self.subTest(name=name):
                self.assertEqual(sorted(typing.get_args(getattr(payloads, name))), sorted(schema_at(file, pointer)["enum"]))

    def test_every_typed_dict_is_checked(self) -> None:
        typed_dicts = {
            n for n in payloads.__all__
            if isinstance(getattr(payloads, n), type) and issubclass(getattr(payloads, n), dict)
        }
        self.assertEqual(typed_dicts - set(TYPED), {"Event"}, "a TypedDict without a schema to check it against")
