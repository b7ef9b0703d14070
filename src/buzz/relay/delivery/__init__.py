"""What readers get: the subscription index and its channel topics, live fan-out,
stored reads and the presence register."""
