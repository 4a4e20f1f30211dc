// Package filelock serialises, across the processes of one machine, the
// work that test helpers do once and keep (building the amduat command,
// compiling WebAssembly modules into a shared cache): an exclusive flock
// on a lock file where the system has flock, a process-wide mutex
// elsewhere.
package filelock
