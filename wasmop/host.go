package wasmop

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/amduat/amduat/asl"
)

// Import module names of the ABI (SPECS.md §20.4, §20.6).
const (
	ModuleABI  = "amduat"
	ModuleWASI = "wasi_snapshot_preview1"
)

// Deterministic WASI values (SPECS.md §20.6).
const (
	// RealtimeBase is the realtime clock at fake time 0:
	// 2000-01-01T00:00:00Z in nanoseconds since the Unix epoch.
	RealtimeBase uint64 = 946684800 * 1000000000
	// ClockStep is how far every clock_time_get advances the fake clock.
	ClockStep uint64 = 1000
	// RandomSeed prefixes the counter of the random_get stream:
	// block k = SHA-256(RandomSeed || uint64_be(k)).
	RandomSeed = "amduat.wasm.run/1 random_get"
)

// WASI errno values used (SPECS.md §20.6).
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoInval   = 28
)

// callState is the state of one call, reached by the host functions through
// the context.
type callState struct {
	inputs  []asl.Artifact // data inputs
	outputs [][]byte
	total   uint64
	maxOut  uint64
	errMsg  []byte
	hasMsg  bool
	console []byte
	clock   uint64
	rndCtr  uint64
	rndBuf  []byte
	fail    *failure // set by a host function before it aborts the call
	// hasMemory: the module has a memory (else its size is 0).
	hasMemory bool
	// fuel is the instance's fuel counter, budget its starting value.
	fuel   api.MutableGlobal
	budget uint64
	// stack is the instance's stack counter (SPECS.md §20.5).
	stack api.Global
	// eng holds the memory budget; held is what this call has reserved in
	// it, memHeld the part reserved for the linear memory.
	eng     *Engine
	held    uint64
	memHeld uint64
	// oper is set, before a host function or the memory allocator aborts
	// the call, when the failure is operational (SPECS.md §20.8).
	oper *OperationalError
	// usedABI is set by every function of the amduat import module: the
	// only host functions whose effect depends on the call's data inputs
	// or params. A module whose _initialize sets it is never snapshotted
	// (snapshot.go).
	usedABI bool
	// mem is the call's linear memory, once the allocator has made it.
	mem *linearMemory
}

type stateKey struct{}

// abort is the panic value a host function ends a call with, after setting
// callState.fail.
type abort struct{}

func state(ctx context.Context) *callState { return ctx.Value(stateKey{}).(*callState) }

// abiState is state for the functions of the amduat import module: it
// records that one was called (callState.usedABI).
func abiState(ctx context.Context) *callState {
	s := state(ctx)
	s.usedABI = true
	return s
}

func (s *callState) abort(code uint32, format string, args ...any) {
	s.fail = fail(code, format, args...)
	panic(abort{})
}

// operational ends the call with an operational failure (no result).
func (s *callState) operational(format string, args ...any) {
	s.oper = &OperationalError{Reason: fmt.Sprintf(format, args...)}
	panic(abort{})
}

// hold reserves n more bytes for what (memory.grow, output_write) in the
// engine's memory budget before they are allocated; beyond the budget the
// call ends operationally (SPECS.md §20.8).
func (s *callState) hold(n uint64, what string) {
	if err := s.eng.reserve(n, s.held, what); err != nil {
		s.oper = err
		panic(abort{})
	}
	s.held += n
}

// span checks that [ptr, ptr+n) lies in the memory and returns it. A
// module without memory has a memory of size 0.
func span(ctx context.Context, m api.Module, ptr, n uint32) ([]byte, bool) {
	if !state(ctx).hasMemory {
		return nil, ptr == 0 && n == 0
	}
	return m.Memory().Read(ptr, n)
}

func (s *callState) memory(ctx context.Context, m api.Module, fn string, ptr, n uint32) []byte {
	b, ok := span(ctx, m, ptr, n)
	if !ok {
		var size uint32
		if s.hasMemory {
			size = m.Memory().Size()
		}
		s.abort(StatusMemoryRange, "%s: memory range [%d, %d) is outside the memory of %d bytes", fn, ptr, uint64(ptr)+uint64(n), size)
	}
	return b
}

func (s *callState) input(fn string, i uint32) *asl.Artifact {
	if uint64(i) >= uint64(len(s.inputs)) {
		s.abort(StatusInputIndex, "%s: input %d out of range (%d data inputs)", fn, i, len(s.inputs))
	}
	return &s.inputs[i]
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

func vt(ts ...api.ValueType) []api.ValueType { return ts }

// hostFunc is one allowed import: its module, name, type and body.
type hostFunc struct {
	module, name    string
	params, results []api.ValueType
	fn              api.GoModuleFunc
}

// hostFuncs lists every allowed import (SPECS.md §20.4, §20.6).
var hostFuncs = []hostFunc{
	{ModuleABI, "input_count", nil, vt(i32), func(ctx context.Context, m api.Module, st []uint64) {
		st[0] = uint64(uint32(len(abiState(ctx).inputs)))
	}},
	{ModuleABI, "input_size", vt(i32), vt(i64), func(ctx context.Context, m api.Module, st []uint64) {
		st[0] = uint64(len(abiState(ctx).input("input_size", uint32(st[0])).Bytes))
	}},
	{ModuleABI, "input_tag", vt(i32), vt(i64), func(ctx context.Context, m api.Module, st []uint64) {
		in := abiState(ctx).input("input_tag", uint32(st[0]))
		if in.HasTag {
			st[0] = uint64(in.Tag)
		} else {
			st[0] = ^uint64(0)
		}
	}},
	{ModuleABI, "input_read", vt(i32, i64, i32, i32), vt(i32), func(ctx context.Context, m api.Module, st []uint64) {
		s := abiState(ctx)
		in := s.input("input_read", uint32(st[0]))
		off, ptr, n := int64(st[1]), uint32(st[2]), uint32(st[3])
		size := int64(len(in.Bytes))
		if off < 0 || off > size {
			s.abort(StatusInputOffset, "input_read: offset %d is outside input %d of %d bytes", off, uint32(st[0]), size)
		}
		dst := s.memory(ctx, m, "input_read", ptr, n)
		st[0] = uint64(uint32(copy(dst, in.Bytes[off:])))
	}},
	{ModuleABI, "output_write", vt(i32, i32, i32), nil, func(ctx context.Context, m api.Module, st []uint64) {
		s := abiState(ctx)
		o, ptr, n := uint32(st[0]), uint32(st[1]), uint32(st[2])
		if uint64(o) >= uint64(len(s.outputs)) {
			s.abort(StatusOutputIndex, "output_write: output %d out of range (%d outputs)", o, len(s.outputs))
		}
		src := s.memory(ctx, m, "output_write", ptr, n)
		if s.total+uint64(n) > s.maxOut || s.total+uint64(n) < s.total {
			s.abort(StatusOutputLimit, "output_write: %d + %d output bytes exceed max_output_bytes %d", s.total, n, s.maxOut)
		}
		s.total += uint64(n)
		buf := s.outputs[o]
		if need := uint64(len(buf)) + uint64(n); need > uint64(cap(buf)) {
			// Grow to twice the size, but never beyond what
			// max_output_bytes still allows this output; the new buffer
			// is reserved before it is allocated, the old one given back
			// once copied.
			room := need + min(s.maxOut-s.total, math.MaxUint64-need)
			newCap := max(need, min(2*uint64(cap(buf)), room))
			s.hold(newCap, "output_write")
			nb := make([]byte, len(buf), newCap)
			copy(nb, buf)
			s.eng.unreserve(uint64(cap(buf)))
			s.held -= uint64(cap(buf))
			buf = nb
		}
		s.outputs[o] = append(buf, src...)
	}},
	{ModuleABI, "set_error", vt(i32, i32), nil, func(ctx context.Context, m api.Module, st []uint64) {
		s := abiState(ctx)
		b := s.memory(ctx, m, "set_error", uint32(st[0]), uint32(st[1]))
		if len(b) > MaxErrorMessage {
			b = b[:MaxErrorMessage]
		}
		s.errMsg, s.hasMsg = append(s.errMsg[:0], b...), true
	}},

	{ModuleWASI, "args_get", vt(i32, i32), vt(i32), wasiNothing},
	{ModuleWASI, "args_sizes_get", vt(i32, i32), vt(i32), wasiTwoZeros},
	{ModuleWASI, "environ_get", vt(i32, i32), vt(i32), wasiNothing},
	{ModuleWASI, "environ_sizes_get", vt(i32, i32), vt(i32), wasiTwoZeros},
	{ModuleWASI, "clock_time_get", vt(i32, i64, i32), vt(i32), wasiClock},
	{ModuleWASI, "random_get", vt(i32, i32), vt(i32), wasiRandom},
	{ModuleWASI, "poll_oneoff", vt(i32, i32, i32, i32), vt(i32), wasiPoll},
	{ModuleWASI, "sched_yield", nil, vt(i32), wasiNothing},
	{ModuleWASI, "proc_exit", vt(i32), nil, func(ctx context.Context, m api.Module, st []uint64) {
		state(ctx).abort(StatusProcExit, "proc_exit(%d)", uint32(st[0]))
	}},
	{ModuleWASI, "fd_write", vt(i32, i32, i32, i32), vt(i32), wasiWrite},
	{ModuleWASI, "fd_read", vt(i32, i32, i32, i32), vt(i32), func(ctx context.Context, m api.Module, st []uint64) {
		if uint32(st[0]) != 0 {
			st[0] = errnoBadf
			return
		}
		st[0] = putU32(ctx, m, uint32(st[3]), 0) // end of file
	}},
	{ModuleWASI, "fd_close", vt(i32), vt(i32), func(ctx context.Context, m api.Module, st []uint64) {
		st[0] = stdioOr(uint32(st[0]), errnoSuccess)
	}},
	{ModuleWASI, "fd_fdstat_get", vt(i32, i32), vt(i32), func(ctx context.Context, m api.Module, st []uint64) {
		fd := uint32(st[0])
		if fd > 2 {
			st[0] = errnoBadf
			return
		}
		var b [24]byte
		b[0] = 2 // character device
		rights := uint64(1 << 6)
		if fd == 0 {
			rights = 1 << 1
		}
		binary.LittleEndian.PutUint64(b[8:], rights)
		st[0] = put(ctx, m, uint32(st[1]), b[:])
	}},
	{ModuleWASI, "fd_fdstat_set_flags", vt(i32, i32), vt(i32), func(ctx context.Context, m api.Module, st []uint64) {
		st[0] = stdioOr(uint32(st[0]), errnoSuccess)
	}},
	{ModuleWASI, "fd_filestat_get", vt(i32, i32), vt(i32), func(ctx context.Context, m api.Module, st []uint64) {
		if uint32(st[0]) > 2 {
			st[0] = errnoBadf
			return
		}
		var b [64]byte
		b[16] = 2 // character device
		st[0] = put(ctx, m, uint32(st[1]), b[:])
	}},
	{ModuleWASI, "fd_prestat_get", vt(i32, i32), vt(i32), wasiBadf},
	{ModuleWASI, "fd_prestat_dir_name", vt(i32, i32, i32), vt(i32), wasiBadf},
	{ModuleWASI, "path_open", vt(i32, i32, i32, i32, i32, i64, i64, i32, i32), vt(i32), wasiBadf},
	{ModuleWASI, "path_filestat_get", vt(i32, i32, i32, i32, i32), vt(i32), wasiBadf},
}

// allowedImports maps "module\x00name" to the import's type.
var allowedImports = func() map[string]FuncType {
	m := make(map[string]FuncType, len(hostFuncs))
	conv := func(ts []api.ValueType) []byte {
		b := make([]byte, len(ts))
		for i, t := range ts {
			b[i] = byte(t)
		}
		return b
	}
	for _, h := range hostFuncs {
		m[h.module+"\x00"+h.name] = FuncType{Params: conv(h.params), Results: conv(h.results)}
	}
	return m
}()

// instantiateHost registers the two host modules in rt.
func instantiateHost(ctx context.Context, rt wazero.Runtime) error {
	for _, mod := range []string{ModuleABI, ModuleWASI} {
		b := rt.NewHostModuleBuilder(mod)
		for _, h := range hostFuncs {
			if h.module == mod {
				b.NewFunctionBuilder().WithGoModuleFunction(h.fn, h.params, h.results).Export(h.name)
			}
		}
		if _, err := b.Instantiate(ctx); err != nil {
			return err
		}
	}
	return nil
}

func stdioOr(fd uint32, ok uint64) uint64 {
	if fd <= 2 {
		return ok
	}
	return errnoBadf
}

// put writes b at ptr and returns the errno (FAULT if outside memory).
func put(ctx context.Context, m api.Module, ptr uint32, b []byte) uint64 {
	dst, ok := span(ctx, m, ptr, uint32(len(b)))
	if !ok {
		return errnoFault
	}
	copy(dst, b)
	return errnoSuccess
}

func putU32(ctx context.Context, m api.Module, ptr, v uint32) uint64 {
	return put(ctx, m, ptr, binary.LittleEndian.AppendUint32(nil, v))
}

func wasiNothing(ctx context.Context, m api.Module, st []uint64) {
	st[0] = errnoSuccess
}

func wasiBadf(ctx context.Context, m api.Module, st []uint64) {
	st[0] = errnoBadf
}

func wasiTwoZeros(ctx context.Context, m api.Module, st []uint64) {
	if _, ok := span(ctx, m, uint32(st[0]), 4); !ok {
		st[0] = errnoFault
		return
	}
	if _, ok := span(ctx, m, uint32(st[1]), 4); !ok {
		st[0] = errnoFault
		return
	}
	putU32(ctx, m, uint32(st[0]), 0)
	st[0] = putU32(ctx, m, uint32(st[1]), 0)
}

func wasiClock(ctx context.Context, m api.Module, st []uint64) {
	s := state(ctx)
	var v uint64
	switch uint32(st[0]) {
	case 0: // realtime
		v = RealtimeBase + s.clock
	case 1, 2, 3: // monotonic, process and thread CPU time
		v = s.clock
	default:
		st[0] = errnoInval
		return
	}
	if st[0] = put(ctx, m, uint32(st[2]), binary.LittleEndian.AppendUint64(nil, v)); st[0] == errnoSuccess {
		s.clock += ClockStep
	}
}

func wasiRandom(ctx context.Context, m api.Module, st []uint64) {
	s := state(ctx)
	dst, ok := span(ctx, m, uint32(st[0]), uint32(st[1]))
	if !ok {
		st[0] = errnoFault
		return
	}
	for len(dst) > 0 {
		if len(s.rndBuf) == 0 {
			h := sha256.New()
			h.Write([]byte(RandomSeed))
			h.Write(binary.BigEndian.AppendUint64(nil, s.rndCtr))
			s.rndCtr++
			s.rndBuf = h.Sum(nil)
		}
		n := copy(dst, s.rndBuf)
		dst, s.rndBuf = dst[n:], s.rndBuf[n:]
	}
	st[0] = errnoSuccess
}

func wasiWrite(ctx context.Context, m api.Module, st []uint64) {
	s := state(ctx)
	fd, iovs, n, nwPtr := uint32(st[0]), uint32(st[1]), uint32(st[2]), uint32(st[3])
	if fd != 1 && fd != 2 {
		st[0] = errnoBadf
		return
	}
	if uint64(n)*8 > 1<<32-1 {
		st[0] = errnoFault
		return
	}
	vec, ok := span(ctx, m, iovs, n*8)
	if !ok {
		st[0] = errnoFault
		return
	}
	if _, ok := span(ctx, m, nwPtr, 4); !ok {
		st[0] = errnoFault
		return
	}
	var total uint32
	for i := range n {
		p := binary.LittleEndian.Uint32(vec[8*i:])
		l := binary.LittleEndian.Uint32(vec[8*i+4:])
		b, ok := span(ctx, m, p, l)
		if !ok {
			st[0] = errnoFault
			return
		}
		if room := MaxConsole - len(s.console); room > 0 {
			s.console = append(s.console, b[:min(len(b), room)]...)
		}
		total += l
	}
	st[0] = putU32(ctx, m, nwPtr, total)
}

// Subscription and event layout of poll_oneoff (SPECS.md §20.6).
const (
	subSize   = 48
	eventSize = 32
)

func wasiPoll(ctx context.Context, m api.Module, st []uint64) {
	s := state(ctx)
	in, out, n, nePtr := uint32(st[0]), uint32(st[1]), uint32(st[2]), uint32(st[3])
	if n == 0 {
		st[0] = errnoInval
		return
	}
	if uint64(n)*subSize > 1<<32-1 {
		st[0] = errnoFault
		return
	}
	subs, ok1 := span(ctx, m, in, n*subSize)
	_, ok2 := span(ctx, m, out, n*eventSize)
	_, ok3 := span(ctx, m, nePtr, 4)
	if !ok1 || !ok2 || !ok3 {
		st[0] = errnoFault
		return
	}
	subs = append([]byte(nil), subs...) // the events may overlap them
	deadline, hasClock := s.clock, false
	for i := range n {
		sub := subs[i*subSize:]
		var ev [eventSize]byte
		copy(ev[:8], sub[:8]) // userdata
		tag := sub[8]
		ev[10] = tag
		switch tag {
		case 0: // clock
			hasClock = true
			id := binary.LittleEndian.Uint32(sub[16:])
			timeout := binary.LittleEndian.Uint64(sub[24:])
			flags := binary.LittleEndian.Uint16(sub[40:])
			target := s.clock + timeout
			if flags&1 != 0 { // absolute
				target = timeout
				if id == 0 {
					target = 0
					if timeout > RealtimeBase {
						target = timeout - RealtimeBase
					}
				}
			} else if target < s.clock {
				target = ^uint64(0)
			}
			deadline = max(deadline, target)
		case 1, 2: // fd_read, fd_write
			if fd := binary.LittleEndian.Uint32(sub[16:]); fd > 2 {
				binary.LittleEndian.PutUint16(ev[8:], errnoBadf)
			}
		default:
			binary.LittleEndian.PutUint16(ev[8:], errnoInval)
		}
		put(ctx, m, out+i*eventSize, ev[:])
	}
	if hasClock {
		s.clock = deadline
	}
	st[0] = putU32(ctx, m, nePtr, n)
}
