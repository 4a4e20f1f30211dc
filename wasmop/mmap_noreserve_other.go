//go:build darwin || freebsd || netbsd || openbsd

package wasmop

const mapNoReserve = 0
