"""The experiments the suite runs, and the published figures each is compared with (published)."""
