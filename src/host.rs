//! The host: config → connections → registry → pipeline → call → audit.
