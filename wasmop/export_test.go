package wasmop

// MmapSupported reports whether large linear memories are mapped lazily
// (so a test may grow one to 65,535 pages without holding 4 GiB).
const MmapSupported = mmapSupported
