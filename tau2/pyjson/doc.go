// Package pyjson reads and writes JSON exactly as τ²-bench's Python does (json.loads, json.dumps
// with its defaults, pydantic field order), so the Go environments hash, compare and print
// databases, tool results and messages byte for byte like the reference: insertion-ordered maps
// (Map, Object), Python's float and string rendering, Python's error wording, and Table, the
// copy-on-write record collection every episode forks from one loaded domain database.
package pyjson
