"""Values: messages, queues, topics, groups, ids, times, timers and the checks made before a write."""
