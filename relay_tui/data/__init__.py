"""What the console reads, off the UI thread: the change feed into snapshots, the detail
screens' reads, an execution's output as it grows. The only package that touches rows."""
