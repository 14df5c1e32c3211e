// Package telecom is τ²-bench's telecom domain in Go (tau2-bench a2c0247,
// src/tau2/domains/telecom): the carrier's agent tools, the customer's
// phone simulation (user tools), the dual-control coupling between them
// (sync_tools), and the environment functions tasks use to break the phone
// and to assert on the outcome. It registers the domains "telecom" and
// "telecom-workflow" (same tools, different tech-support policy) with
// package env.
//
// # Data
//
// db.toml (TelecomDB: plans, customers, lines, bills, devices; all lists,
// scanned in order) and user_db.toml (TelecomUserDB: the device and the
// user's surroundings) are parsed once per process and validated like
// pydantic does (lax scalar coercion, extra fields forbidden, dates from ISO
// strings). Every environment gets deep copies (a few KB). The record types
// implement pyjson.Marshaler/Unmarshaler with τ²'s model_dump() field order,
// so env's hashing, DB comparison and initialization_data merging see
// exactly what τ² sees; datetimes print as Python's str() ("2025-01-20
// 14:30:00"), which is what json.dumps(default=str) emits.
//
// # Semantics reproduced
//
//   - "today" is 2025-02-25; every date computed by a tool derives from it.
//   - Tool results are τ²'s exact strings and to_json_str JSON; tools return
//     live records, serialized after sync_tools as in Python.
//   - Sync runs after every successful tool call, after every environment
//     function and at the end of set_state; it never re-runs the network
//     search. simulate_network_search runs only inside the user actions
//     that trigger it in τ².
//   - Environment functions are resolved by name on either toolkit (tools
//     included), with Python's keyword-binding errors.
//   - Wrong JSON argument types behave as Python does where that is a
//     defined outcome: lookups with a non-string id simply miss ("Customer
//     with ID 5 not found"), unhashable app names raise "unhashable type",
//     gb_amount strings raise "'<=' not supported ...", a bool gb_amount
//     counts as 1 and prints "True", get_bills_for_customer's limit follows
//     Python slicing (negative, None, bool).
//
// # Deliberate deviations (documented, tested)
//
//   - set_network_mode_preference with a non-string mode and
//     set_apn_settings with a non-object argument: τ² stores the bad value
//     in the device and then fails (corrupting every later call); the Go
//     port returns the same kind of tool error without touching the device.
//   - τ²'s default_vpn_details is one class-level object: break_vpn degrades
//     it in place, so in a Python process that ever ran break_vpn every
//     later connect_vpn (in any episode) is poor. Here the object is shared
//     within one environment (and its forks) only: break_vpn followed by
//     disconnect/connect in the same episode is still poor, but episodes are
//     independent.
//   - refuel_data on a customer without a Draft bill creates one with a
//     random id in τ² (uuid4); here the id has the same shape but is
//     deterministic. No shipped task reaches that branch.
//   - set_data_usage stores the number as a float (τ² assigns the raw JSON
//     value, so an int would dump as 15 instead of 15.0); tasks pass floats.
//   - Initialization-only functions that take flags (set_user_location,
//     set_wifi_calling's mms_over_wifi, set_user_info) require JSON bools /
//     strings; τ² would store anything.
//   - Private helpers (_toggle_data, _check_status_bar, …) are not callable
//     by name; no task uses them.
package telecom
