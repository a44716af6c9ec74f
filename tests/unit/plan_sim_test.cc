// Placeholder replaced by the planner's table-driven tests.
