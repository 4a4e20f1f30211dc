package wasmop

import "syscall"

const mapNoReserve = syscall.MAP_NORESERVE
