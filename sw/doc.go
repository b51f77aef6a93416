// Package sw reads Serverless Workflow 1.0 documents and runs them as a
// pure state machine.
//
// Parse validates a document (YAML or JSON) and lists every problem by its
// JSON pointer, unsupported constructs included. Start and Resume take the
// interpreter state (Runtime, plain JSON) and one event each, and return
// the Step to write: the items to create (ticks, timers, calls, events to
// emit or wait for, child workflows), the items withdrawn, and whether the
// workflow completed or faulted. The package does no I/O and keeps no
// state between calls, so a restarted node resumes from the last Runtime
// written.
//
// Choices where the DSL leaves room:
//   - `if` is evaluated on the task's raw input; a skipped task outputs its
//     raw input and the flow goes on to the next task.
//   - `exit` inside a for body ends the whole loop.
//   - retry limit.attempt.count counts retries after the first run; when
//     retries are exhausted catch.do runs if there is one, otherwise the
//     error goes on to the enclosing try (or faults the workflow).
//     Backoff: constant = delay, linear = delay × n, exponential =
//     delay × 2^(n-1) for retry n.
//   - catch when/exceptWhen see the try's transformed input as `.` and the
//     error in its variable.
//   - listen outputs an array in every mode: one → [event], any → the
//     events consumed, all → one per filter in filter order; `until` is a
//     runtime expression on that array, evaluated after each event.
//   - schemas (format json, a JSON Schema inline under document; 2020-12
//     unless the format's version or the document's $schema says otherwise)
//     are compiled at Parse; an external schema (resource), another format,
//     or a $ref outside the document is a Parse problem, as the package
//     does no I/O. A failing value raises a validation error (status 400)
//     whose instance is the task's pointer, or /input/schema and
//     /output/schema for the workflow's own schemas. A task's input schema
//     is checked after `if`; its export schema checks the new context
//     (the current one without export.as) before it replaces the old one.
package sw
