"""The soak of a Granary cluster: a workload, a nemesis and a checker
(tests/soak/README.md)."""
