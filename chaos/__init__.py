"""Fault injection for the chaos suite: crash states, nemeses and the invariant checks; it drives
`timeline.crash_points`, the crash-point registry the protocol modules call."""
