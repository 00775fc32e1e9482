"""Operator tools: Admin, the console's admin views, mq doctor, eviction recovery, rates, ACL rules."""
