"""What the operator sees and keeps: log lines, metrics, repeated-trouble lines, the
data-dir lock, the relay's key file and the crash hook of the repair tests."""
