"""What writers send: prechecks, the ingest pipeline, the per-kind rules, the
relay-emitted follow-ups, rate limits and the workflow engine's host."""
