"""The workflow engine (spec/workflows.md; docs/workflows.md), split like the rest of buzz.

This package is the pure core: no I/O, no asyncio, no clock reads except the condition
evaluator's 100 ms fence. It imports `buzz.core` only. The runner (store tables, leases,
scheduler, dispatch through the relay's emit path) is built on it and lives beside it.

    limits       every number (§20) and the duration table
    yaml_tree    YAML 1.2 core-schema text → JSON tree with line/column of every node
    validate     tree → Definition, or every error and warning with path, line, column
    definition   the typed definition: triggers, steps, the eight actions
    conditions   condition grammar (condition.lark), parser, bounded evaluator
    templates    `{{ trigger.x }}` / `{{ steps.id.output.f }}` with truncate(N) and npub
    schedule     buzz's cron over croniter, intervals, next_fire / due
    context      trigger contexts of the four doors, condition variables, the door check
    resolve      a step's fields rendered and checked at run time
    machine      the run state machine: advance(run, input) → (run, effects)
    approvals    approver specs, approval states, grant/deny checks
    events       lifecycle 46001–46007, approvals 46010–46012, job 43001/43005; 46020/46030/46031 parsers
    capacity     admission (queue, rate), which pending runs start (permits, max_concurrent)
    mentions     `@Name` in a message step → the member's pubkey

The runner: `rows` (runs ↔ store rows), `host` (what the relay lends the engine), `actions`,
`drive` (leased runs), `engine` (doors, scan), `scheduler`, `commands` (30620 save, 46020,
46030/46031), `webhook_call`. tests/test_layers.py (PURE_CORES) holds the split.
"""
