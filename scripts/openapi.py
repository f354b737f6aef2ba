#!/usr/bin/env python3
"""Writes docs/openapi.json: the OpenAPI 3.1 document of `mwp serve`.

The JSON Schemas of the command bodies, the event kinds and the types they hold are read
from the Rust types in core/src (the `bodies!` list of command.rs, the `EventKind` enum of
event.rs and the structs and enums they name), so a field added there appears here when
this script is run again:

    python3 scripts/openapi.py            # rewrites docs/openapi.json
    python3 scripts/openapi.py --check    # exits 1 when docs/openapi.json is stale

host-native/tests/e2e_openapi.rs checks the result against the router and the Rust types,
and validates every event of tests/vectors and every example of docs/http.md against it.
"""

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE = os.path.join(ROOT, "core", "src")
OUT = os.path.join(ROOT, "docs", "openapi.json")

SOURCES = ["command.rs", "event.rs", "receipt.rs", "lease.rs", "work.rs", "error.rs"]


def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def read(name):
    with open(os.path.join(CORE, name), encoding="utf-8") as f:
        return f.read()


def fields_of(block):
    """(name, type, optional) of each `pub name: Type` (or macro `name: Type`) in block."""
    out = []
    attrs = []
    for line in block.splitlines():
        line = line.strip()
        if line.startswith("#[serde("):
            attrs.append(line)
            continue
        if line.startswith("//") or line.startswith("#[") or not line:
            continue
        m = re.match(r"(?:pub\s+)?([a-z_][a-z0-9_]*)\s*:\s*(.+?),?$", line)
        if m:
            name, ty = m.group(1), m.group(2).rstrip(",").strip()
            rename = None
            for a in attrs:
                r = re.search(r'rename\s*=\s*"([^"]+)"', a)
                if r:
                    rename = r.group(1)
            optional = any("skip_serializing_if" in a or "default" in a for a in attrs)
            out.append((rename or name, ty, optional or ty.startswith("Option<")))
        attrs = []
    return out


def structs(text):
    """Every `pub struct Name { … }` with named fields."""
    found = {}
    for m in re.finditer(r"pub struct (\w+)\s*\{(.*?)\n\}", text, re.S):
        found[m.group(1)] = fields_of(m.group(2))
    return found


def unit_enums(text):
    """Every `rename_all = "snake_case"` enum whose variants are all units."""
    found = {}
    for m in re.finditer(
        r'#\[serde\(rename_all = "snake_case"\)\]\s*pub enum (\w+)\s*\{(.*?)\n\}', text, re.S
    ):
        body = m.group(2)
        variants = re.findall(r"^\s*([A-Z]\w*),\s*$", body, re.M)
        if variants and "(" not in re.sub(r"//.*", "", body):
            found[m.group(1)] = [snake(v) for v in variants]
    return found


def bodies(text):
    """(Variant, Type, fields) of the `bodies!` list."""
    block = text[text.index("bodies! {") :]
    out = []
    for m in re.finditer(r"^    (\w+)\((\w+)\)\s*\{(.*?)\}", block, re.M | re.S):
        out.append((m.group(1), m.group(2), fields_of(m.group(3))))
    return out


def event_kinds(text):
    block = text[text.index("pub enum EventKind {") :]
    block = block[: block.index("\n}")]
    return re.findall(r"^\s*(\w+)\((\w+)\),", block, re.M)


def schema_of(ty, known):
    ty = ty.strip()
    m = re.match(r"Option<(.+)>$", ty)
    if m:
        return schema_of(m.group(1), known)
    m = re.match(r"Vec<(.+)>$", ty)
    if m:
        return {"type": "array", "items": schema_of(m.group(1), known)}
    simple = {
        "u64": {"$ref": "#/components/schemas/Uint"},
        "u32": {"type": "integer", "minimum": 0, "maximum": 4294967295},
        "bool": {"type": "boolean"},
        "String": {"type": "string"},
        "compact_str::CompactString": {"type": "string"},
        "CompactString": {"type": "string"},
    }
    if ty in simple:
        return simple[ty]
    if ty in known:
        return {"$ref": "#/components/schemas/" + ty}
    raise SystemExit(f"openapi.py: no schema for Rust type {ty!r}")


def object_schema(fields, known, description=None, tag=None):
    props = {}
    required = []
    if tag is not None:
        props["type"] = {"const": tag}
        required.append("type")
    for name, ty, optional in fields:
        props[name] = schema_of(ty, known)
        if not optional:
            required.append(name)
    s = {"type": "object", "properties": props, "required": required}
    s["additionalProperties"] = False
    if description:
        s["description"] = description
    return s


def build():
    texts = {n: read(n) for n in SOURCES}
    all_structs = {}
    all_enums = {}
    for t in texts.values():
        all_structs.update(structs(t))
        all_enums.update(unit_enums(t))
    body_list = bodies(texts["command.rs"])
    for _, ty, fields in body_list:
        all_structs[ty] = fields
    kinds = event_kinds(texts["event.rs"])

    schemas = {
        "Uint": {"type": "integer", "minimum": 0, "maximum": 18446744073709551615},
        "Id": {
            "type": "string",
            "pattern": "^[A-Za-z0-9._:@~-]{1,128}$",
            "description": "1-128 bytes of [A-Za-z0-9._:@~-]",
        },
        "Hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "PublicKey": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "Signature": {"type": "string", "pattern": "^[0-9a-f]{128}$"},
        "LeaseId": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
        "Opaque": {
            "description": "Any JSON value without floats (SPEC §2); stored and hashed as given"
        },
    }
    known = set(schemas) | set(all_structs) | set(all_enums) | {"Body", "EventKind"}
    for name in sorted(all_enums):
        if name == "Code":
            continue
        schemas[name] = {"type": "string", "enum": all_enums[name]}
    # The structs the bodies and kinds need, found by following their fields.
    wanted = [ty for _, ty, _ in body_list] + [ty for _, ty in kinds] + ["Receipt", "Lease"]
    seen = set()
    while wanted:
        ty = wanted.pop()
        if ty in seen or ty not in all_structs:
            continue
        seen.add(ty)
        for _, fty, _ in all_structs[ty]:
            for inner in re.findall(r"\w+", fty):
                if inner in all_structs and inner not in seen:
                    wanted.append(inner)
    body_types = {ty for _, ty, _ in body_list}
    kind_types = {ty for _, ty in kinds}
    for ty in sorted(seen):
        if ty in body_types or ty in kind_types:
            continue
        schemas[ty] = object_schema(all_structs[ty], known)
    body_refs = []
    for variant, ty, fields in body_list:
        name = "Body" + variant
        schemas[name] = object_schema(
            fields, known, f"Command body `{snake(variant)}`", tag=snake(variant)
        )
        body_refs.append({"$ref": "#/components/schemas/" + name})
    schemas["Body"] = {
        "description": "A command's body, tagged by `type` (SPEC §2)",
        "oneOf": body_refs,
    }
    kind_refs = []
    for variant, ty in kinds:
        name = "Kind" + variant
        schemas[name] = object_schema(
            all_structs[ty], known, f"Event kind `{snake(variant)}`", tag=snake(variant)
        )
        kind_refs.append({"$ref": "#/components/schemas/" + name})
    schemas["EventKind"] = {
        "description": "What an event records, tagged by `type`",
        "oneOf": kind_refs,
    }
    cmd = structs(texts["command.rs"])["Command"]
    schemas["Command"] = object_schema(cmd, known, "A signed command (SPEC §2)")
    ev = structs(texts["event.rs"])["Event"]
    schemas["Event"] = object_schema(ev, known, "An accepted event (SPEC §3)")
    codes = re.findall(r'Code::\w+ => "([A-Z_]+)"', texts["error.rs"])
    schemas["Code"] = {"type": "string", "enum": sorted(set(codes))}
    schemas["Error"] = {
        "description": "Every error: a code, a message, and details named per code",
        "type": "object",
        "properties": {
            "code": {"$ref": "#/components/schemas/Code"},
            "message": {"type": "string"},
        },
        "required": ["code", "message"],
    }
    schemas["Events"] = {
        "type": "object",
        "properties": {
            "events": {"type": "array", "items": {"$ref": "#/components/schemas/Event"}},
            "head": {
                "$ref": "#/components/schemas/SignedHead",
                "description": "The latest signed head (SPEC §8a); every mwp store signs "
                "heads, a service that cannot leaves it out",
            },
        },
        "required": ["events"],
        "additionalProperties": False,
    }
    schemas["SignedHead"] = {
        "description": "A signed head (SPEC §8a): the authority says event `seq` of `group` has "
        "id `id`; `sig` is Ed25519 over the SHA-256 of the canonical CBOR of the other fields",
        "type": "object",
        "properties": {
            "schema": {"const": "mwp.head.v1"},
            "org": {"$ref": "#/components/schemas/Id"},
            "group": {"$ref": "#/components/schemas/Id"},
            "seq": {"$ref": "#/components/schemas/Uint"},
            "id": {"$ref": "#/components/schemas/Hash"},
            "at": {"$ref": "#/components/schemas/Uint"},
            "sig": {"$ref": "#/components/schemas/Signature"},
        },
        "required": ["schema", "org", "group", "seq", "id", "at", "sig"],
        "additionalProperties": False,
    }
    schemas["AuditManifest"] = {
        "description": "The manifest of a sealed audit log (SPEC §6a, docs/format.md): what was "
        "sealed and the hash of its ciphertext; `sig` is Ed25519 by `authority` over the SHA-256 "
        "of the canonical CBOR of the other fields",
        "type": "object",
        "properties": {
            "schema": {"const": "mwp.audit-manifest.v1"},
            "org": {"$ref": "#/components/schemas/Id"},
            "group": {"$ref": "#/components/schemas/Id"},
            "seq": {"$ref": "#/components/schemas/Uint"},
            "id": {"$ref": "#/components/schemas/Hash"},
            "snapshot": {"$ref": "#/components/schemas/Hash"},
            "state_hash": {"$ref": "#/components/schemas/Hash"},
            "ciphertext": {"$ref": "#/components/schemas/Hash"},
            "ciphertext_len": {"$ref": "#/components/schemas/Uint"},
            "recipients": {"type": "array", "items": {"type": "string", "pattern": "^age1[02-9ac-hj-np-z]{58}$"}},
            "sealed_at": {"$ref": "#/components/schemas/Uint"},
            "retain_until": {"$ref": "#/components/schemas/Uint"},
            "remove_plain": {"type": "boolean"},
            "authority": {"$ref": "#/components/schemas/PublicKey"},
            "sig": {"$ref": "#/components/schemas/Signature"},
        },
        "required": [
            "schema", "org", "group", "seq", "id", "snapshot", "state_hash", "ciphertext",
            "ciphertext_len", "recipients", "sealed_at", "retain_until", "remove_plain",
            "authority", "sig",
        ],
        "additionalProperties": False,
    }
    schemas["Authority"] = {
        "type": "object",
        "properties": {"key": {"$ref": "#/components/schemas/PublicKey"}},
        "required": ["key"],
        "additionalProperties": False,
    }
    schemas["Groups"] = {
        "type": "object",
        "properties": {
            "groups": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "group": {"$ref": "#/components/schemas/Id"},
                        "head": {"$ref": "#/components/schemas/Uint"},
                    },
                    "required": ["group", "head"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["groups"],
        "additionalProperties": False,
    }
    schemas["Snapshot"] = {
        "description": "A signed snapshot (SPEC §8); `state` is the canonical group state",
        "type": "object",
        "properties": {
            "schema": {"type": "string"},
            "org": {"$ref": "#/components/schemas/Id"},
            "group": {"$ref": "#/components/schemas/Id"},
            "mission": {"$ref": "#/components/schemas/Id"},
            "seq": {"$ref": "#/components/schemas/Uint"},
            "chain_head": {"$ref": "#/components/schemas/Hash"},
            "state_hash": {"$ref": "#/components/schemas/Hash"},
            "state": {"type": "object"},
            "signer": {"$ref": "#/components/schemas/PublicKey"},
            "sig": {"$ref": "#/components/schemas/Signature"},
        },
        "required": [
            "schema", "org", "group", "mission", "seq", "chain_head", "state_hash", "state",
            "signer", "sig",
        ],
        "additionalProperties": False,
    }
    schemas["Health"] = {
        "type": "object",
        "properties": {"status": {"enum": ["alive", "ready"]}},
        "required": ["status"],
        "additionalProperties": False,
    }
    # Event = envelope + kind (the `kind` field is the tagged EventKind).
    return {"schemas": dict(sorted(schemas.items()))}


def json_answer(ref, description):
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/" + ref}}},
    }


def error_answer(description):
    return json_answer("Error", description)


def param(name, where="path", schema=None):
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "schema": schema or {"$ref": "#/components/schemas/Id"},
    }


def paths():
    uint = {"$ref": "#/components/schemas/Uint"}
    errors = {
        "400": error_answer("MALFORMED: a bad path, query or header value"),
        "401": error_answer("UNAUTHORIZED: a read without a credential (see docs/http.md, Access)"),
        "403": error_answer("FORBIDDEN: the credential does not allow this read"),
        "404": error_answer("NOT_FOUND: an unknown group"),
        "503": error_answer("STORAGE: the store failed"),
    }
    group = param("group")
    return {
        "/v1/authority": {
            "get": {
                "summary": "The authority's public key",
                "operationId": "authority",
                "responses": {"200": json_answer("Authority", "The key")},
            }
        },
        "/v1/groups": {
            "get": {
                "summary": "Groups and their heads",
                "operationId": "groups",
                "responses": {"200": json_answer("Groups", "The groups"), **errors},
            }
        },
        "/v1/groups/{group}/commands": {
            "post": {
                "summary": "Submit a signed command",
                "operationId": "submitCommand",
                "parameters": [group],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Command"}},
                        "application/cbor": {"schema": {"$ref": "#/components/schemas/Command"}},
                    },
                },
                "responses": {
                    "200": {
                        **json_answer(
                            "Receipt",
                            "Accepted, or a duplicate (header Mwp-Duplicate: true) with the original receipt",
                        ),
                        "headers": {
                            "Mwp-Duplicate": {"schema": {"const": "true"}},
                        },
                    },
                    "400": error_answer("MALFORMED"),
                    "401": error_answer("BAD_SIGNATURE, UNKNOWN_ACTOR or UNAUTHORIZED"),
                    "403": error_answer("FORBIDDEN"),
                    "409": error_answer("A rule of SPEC §3-§5 said no; nothing changed"),
                    "503": error_answer("STORAGE: the store failed; retry"),
                },
            }
        },
        "/v1/groups/{group}/events": {
            "get": {
                "summary": "A page of events after a cursor",
                "operationId": "events",
                "parameters": [
                    group,
                    param("after", "query", uint),
                    param("limit", "query", uint),
                ],
                "responses": {
                    "200": json_answer(
                        "Events",
                        "Events with seq > after, in order, and the latest signed head",
                    ),
                    "410": error_answer("CURSOR_TOO_OLD, with `snapshot: {seq, hash, location}`"),
                    **errors,
                },
            }
        },
        "/v1/groups/{group}/events/stream": {
            "get": {
                "summary": "Live tail as server-sent events",
                "operationId": "streamEvents",
                "parameters": [
                    group,
                    param("after", "query", uint),
                    param("Last-Event-ID", "header", {"type": "string"}),
                ],
                "responses": {
                    "200": {
                        "description": "One SSE message per event: `id:` its seq, `data:` the "
                        "event's JSON; and `event: head` messages whose `data:` is a signed head",
                        "content": {
                            "text/event-stream": {
                                "schema": {"type": "string"},
                                "x-item-schema": {"$ref": "#/components/schemas/Event"},
                                "x-head-schema": {"$ref": "#/components/schemas/SignedHead"},
                            }
                        },
                    },
                    "410": error_answer("CURSOR_TOO_OLD"),
                    "429": error_answer("NOT_YET: over the live-tail cap (Retry-After: 5)"),
                    **errors,
                },
            }
        },
        "/v1/groups/{group}/head": {
            "get": {
                "summary": "The latest signed head (SPEC §8a)",
                "operationId": "head",
                "parameters": [group],
                "responses": {
                    "200": {
                        "description": "The signed head (JSON, or CBOR by Accept)",
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/SignedHead"}
                            },
                            "application/cbor": {},
                        },
                    },
                    **errors,
                },
            }
        },
        "/v1/groups/{group}/audit": {
            "get": {
                "summary": "The signed manifest of the group's sealed audit log (SPEC §6a)",
                "operationId": "auditManifest",
                "parameters": [group],
                "responses": {
                    "200": {
                        "description": "The manifest (JSON, or CBOR by Accept)",
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/AuditManifest"}
                            },
                            "application/cbor": {},
                        },
                    },
                    **errors,
                    "404": error_answer("NOT_FOUND: an unknown group, or one not sealed"),
                },
            }
        },
        "/v1/groups/{group}/receipts/{actor}/{action}": {
            "get": {
                "summary": "The receipt of an accepted command",
                "operationId": "receipt",
                "parameters": [group, param("actor"), param("action")],
                "responses": {"200": json_answer("Receipt", "The receipt"), **errors},
            }
        },
        "/v1/groups/{group}/snapshots/latest": {
            "get": {
                "summary": "The latest signed snapshot (CBOR by default)",
                "operationId": "latestSnapshot",
                "parameters": [group],
                "responses": {
                    "200": {
                        "description": "The snapshot",
                        "content": {
                            "application/cbor": {},
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/Snapshot"}
                            },
                        },
                    },
                    **errors,
                },
            }
        },
        "/v1/openapi.json": {
            "get": {
                "summary": "This document",
                "operationId": "openapi",
                "responses": {
                    "200": {
                        "description": "OpenAPI 3.1",
                        "content": {"application/json": {}},
                    }
                },
            }
        },
        "/healthz": {
            "get": {
                "summary": "The process answers",
                "operationId": "healthz",
                "responses": {"200": json_answer("Health", "`{\"status\": \"alive\"}`")},
            }
        },
        "/readyz": {
            "get": {
                "summary": "The store accepts writes",
                "operationId": "readyz",
                "responses": {
                    "200": json_answer("Health", "`{\"status\": \"ready\"}`"),
                    "503": error_answer(
                        "STORAGE: the latest write failed; `reason` is its error"
                    ),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus (OpenMetrics) text",
                "operationId": "metrics",
                "responses": {
                    "200": {
                        "description": "The metrics of docs/http.md, Operations",
                        "content": {"application/openmetrics-text": {}},
                    }
                },
            }
        },
    }


def document():
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "mwp serve",
            "version": "1",
            "description": "The HTTP API of `mwp serve` (docs/http.md, SPEC §11). Bodies are JSON "
            "or canonical CBOR; every error is `{code, message, ...details}`.",
        },
        "paths": paths(),
        "components": build(),
    }


def main():
    text = json.dumps(document(), indent=2, ensure_ascii=False) + "\n"
    if "--check" in sys.argv[1:]:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print("docs/openapi.json is stale: run python3 scripts/openapi.py", file=sys.stderr)
                sys.exit(1)
        return
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
