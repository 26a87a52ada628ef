import Testing

/// The admin end-to-end suites. Each test starts a whole service with a database of its own, so they run one
/// at a time, sparing the timing-sensitive suites that run beside them on a small machine.
@Suite(.serialized, .timeLimit(.minutes(3))) struct AdminTests {}
