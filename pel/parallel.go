package pel

import (
	"container/heap"
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
)

// Parallel evaluation (SPECS.md §12.10) is speculative: the canonical loop of
// RunWith stays the only place where anything is decided (limits, index
// errors, the memo, the observer, releasing outputs), and a speculator runs
// the operations of later nodes whose inputs are already available, on a
// bounded pool, so that their results are ready when the canonical loop
// reaches them. The canonical loop takes a speculated result exactly where
// it would have called Operation.Run, and runs the operation itself when
// there is none. A speculated result that the canonical loop never reaches
// (it stopped earlier, or the memo answered) is dropped, so speculation
// changes no output, result, trace event or error.

// specMinHashBytes is the input size from which a pel.bytes.hash.asl1 node
// is worth running ahead of the canonical order: 64 KiB is about 35 µs of
// SHA-256 on an idle core (BenchmarkParallelThreshold measures the
// crossover). Tests lower it to speculate everything.
var specMinHashBytes uint64 = 64 << 10

// specMaxBytes bounds the declared output bytes of speculated results not
// yet taken when the run has no output-bytes limit and no memory budget.
const specMaxBytes = 256 << 20

// specLookahead bounds how far (in canonical positions) speculation runs
// ahead of the canonical loop.
const specLookahead = 256

// Job states.
const (
	jobQueued int32 = iota
	jobRunning
	jobCancelled
)

// specJob is one speculated operation call.
type specJob struct {
	node     *Node
	op       *opreg.Operation
	call     opreg.RopeCall
	eager    opreg.Call // the inputs in memory, for an operation without RunRope
	declared uint64     // the declared output size (0 when undeclared)
	state    atomic.Int32
	done     chan struct{} // closed when exec has finished

	// Set by exec before done is closed.
	res      []*asl.Rope
	oerr     *opreg.OpError
	rerr     error
	ierr     *InternalError
	returned bool // exec's call returned (false: the goroutine exited)
}

// exec runs the operation, containing a panic exactly as the canonical
// loop would.
func (j *specJob) exec() {
	defer close(j.done)
	j.ierr = contain(j.node.ID, j.node.Op, "run", func() { j.res, j.oerr, j.rerr = runOp(j.op, j.call, j.eager) })
	j.returned = true
}

// pendingNode is a node waiting for its inputs: it is ready once the
// canonical loop has passed readyAt (the canonical position of its last
// node input).
type pendingNode struct {
	readyAt int32
	i       int32
}

type pendingHeap []pendingNode

func (h pendingHeap) Len() int { return len(h) }
func (h pendingHeap) Less(a, b int) bool {
	return h[a].readyAt < h[b].readyAt || h[a].readyAt == h[b].readyAt && h[a].i < h[b].i
}
func (h pendingHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *pendingHeap) Push(x any)   { *h = append(*h, x.(pendingNode)) }
func (h *pendingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// specStats count what a speculator did (tests read them).
type specStats struct {
	Dispatched, Taken, Dropped, Inline int
}

// speculator runs operations ahead of the canonical loop of one RunWith.
// All its methods are called from the canonical loop's goroutine; only
// specJob.exec runs elsewhere.
type speculator struct {
	pl     *Plan
	inputs []*asl.Rope
	params *asl.Rope
	outs   *liveOuts // the evaluation's live outputs (read only here)
	opts   RunOptions
	ctx    context.Context
	maxMat int64 // RunOptions.MaxMaterialize with its default

	x       nodeIndex
	pos     []int32 // canonical position of each node index
	cursor  int     // next canonical position to consider
	pending pendingHeap
	jobs    map[int32]*specJob // not yet taken, by node index
	bytes   uint64             // declared bytes of jobs not yet taken

	maxJobs int
	queue   chan *specJob
	started bool
	wg      sync.WaitGroup
	stats   specStats
}

// specTestHook, when set (by tests), receives each speculator's counts
// when its run ends.
var specTestHook func(specStats)

// newSpeculator returns a speculator for one run, or nil when the run is
// sequential: opts.Workers is 0 or 1, or no node is worth speculating.
func newSpeculator(pl *Plan, inputs []*asl.Rope, params *asl.Rope, outs *liveOuts, opts RunOptions, maxMat int64) *speculator {
	if opts.Workers <= 1 {
		return nil
	}
	worth := false
	for _, op := range pl.ops { // the distinct operations
		if speculable(op) {
			worth = true
			break
		}
	}
	if !worth {
		return nil
	}
	pos := make([]int32, pl.c.len())
	for k, i := range pl.g.order {
		pos[i] = int32(k)
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return &speculator{pl: pl, inputs: inputs, params: params, outs: outs, opts: opts, ctx: ctx, maxMat: maxMat, x: newNodeIndex(pl.c.ids), pos: pos,
		jobs: make(map[int32]*specJob), maxJobs: 2 * opts.Workers}
}

// speculable reports whether a node of op may be worth running ahead:
// pel.bytes.hash.asl1 (over large enough inputs, checked when they are
// known) and every operation outside the kernel. The other kernel
// operations rearrange bytes and cost less than a hand-off.
func speculable(op *opreg.Operation) bool {
	return op.ID == opreg.OpHash || !strings.HasPrefix(op.ID.Name, opreg.ReservedPrefix)
}

// runState is what the canonical loop knows at node i just before the
// operation would run.
type runState struct {
	held        uint64 // output bytes held (memory budget)
	outputBytes uint64 // output bytes of the nodes before i (max_output_bytes)
	declared    uint64 // node i's declared output bytes, when hasDeclared
	hasDeclared bool
}

// runOp is the canonical loop's call of node i's operation (runOp of
// exec.go): the speculated result when there is one, otherwise the
// operation run on this goroutine.
func (s *speculator) runOp(pl *Plan, i int32, call opreg.RopeCall, eager opreg.Call, st runState) ([]*asl.Rope, *opreg.OpError, error, *InternalError) {
	if s != nil {
		if j := s.take(i, st); j != nil {
			if !j.returned {
				return nil, nil, nil, &InternalError{NodeID: pl.c.ids[i], Op: pl.opOf(i).ID, Phase: "run", Reason: "the operation ended its goroutine (runtime.Goexit)"}
			}
			return j.res, j.oerr, j.rerr, j.ierr
		}
	}
	node, op := pl.c.node(int(i)), pl.opOf(i)
	var res []*asl.Rope
	var oerr *opreg.OpError
	var rerr error
	ierr := contain(node.ID, node.Op, "run", func() { res, oerr, rerr = runOp(op, call, eager) })
	return res, oerr, rerr, ierr
}

// take is called at node i's operation call: nodes before it in canonical
// order have all been committed. It drops the speculations the canonical
// loop passed, starts new ones, and returns node i's job, finished, or nil
// to run the operation inline.
func (s *speculator) take(i int32, st runState) *specJob {
	k := s.pos[i]
	for n, j := range s.jobs {
		if s.pos[n] < k {
			s.drop(n, j)
		}
	}
	j := s.jobs[i]
	if j != nil {
		delete(s.jobs, i)
		s.bytes -= j.declared
	}
	s.fill(k, st)
	if j == nil {
		s.stats.Inline++
		return nil
	}
	s.stats.Taken++
	if j.state.CompareAndSwap(jobQueued, jobRunning) {
		j.exec()
		return j
	}
	// A worker runs it: help with the queue while waiting.
	for {
		select {
		case <-j.done:
			return j
		case o := <-s.queue:
			if o.state.CompareAndSwap(jobQueued, jobRunning) {
				o.exec()
			}
		}
	}
}

// drop discards the speculation of node n, waiting for it if a worker is
// running it, so that its bytes are gone when they stop being counted.
func (s *speculator) drop(n int32, j *specJob) {
	if !j.state.CompareAndSwap(jobQueued, jobCancelled) {
		<-j.done
	}
	delete(s.jobs, n)
	s.bytes -= j.declared
	s.stats.Dropped++
}

// fill starts speculations while there is room: first pending nodes whose
// inputs became available, then new positions up to the lookahead.
func (s *speculator) fill(k int32, st runState) {
	for len(s.pending) > 0 && len(s.jobs) < s.maxJobs && s.pending[0].readyAt < k {
		p := heap.Pop(&s.pending).(pendingNode)
		if s.pos[p.i] > k {
			s.dispatch(p.i, k, st)
		}
	}
	order := s.pl.g.order
	if s.cursor <= int(k) {
		s.cursor = int(k) + 1
	}
	for ; s.cursor < len(order) && s.cursor <= int(k)+specLookahead && len(s.jobs) < s.maxJobs; s.cursor++ {
		i := order[s.cursor]
		if !speculable(s.pl.opOf(i)) {
			continue
		}
		readyAt := int32(-1)
		for _, in := range s.pl.c.inputsOf(int(i)) {
			if in.Kind == InputNode {
				t, _ := s.x.find(in.NodeID)
				readyAt = max(readyAt, s.pos[t])
			}
		}
		switch {
		case readyAt < k:
			s.dispatch(i, k, st)
		case readyAt < int32(s.cursor)-1:
			heap.Push(&s.pending, pendingNode{readyAt: readyAt, i: i})
		}
		// Otherwise its last input is the node just before it in canonical
		// order: it is ready only when the canonical loop reaches it.
	}
}

// dispatch starts node i (canonical position above k, inputs committed)
// when it can run, is worth it and fits the bounds; otherwise the canonical
// loop will run it (and report whatever it must).
func (s *speculator) dispatch(i, k int32, st runState) {
	pl := s.pl
	node, op := pl.c.node(int(i)), pl.opOf(i)
	if s.opts.Limits.MaxNodes > 0 && uint64(s.pos[i]) >= s.opts.Limits.MaxNodes {
		return // the node limit stops the run first
	}
	var inBytes uint64
	for _, in := range node.Inputs {
		r, ok := s.input(in)
		// An operation without RunRope reads its inputs into memory: it is
		// speculated only when they are there already (no I/O, nothing
		// read ahead).
		if !ok || op.RunRope == nil && !r.InMemory() {
			return
		}
		inBytes += r.Size()
	}
	if op.ID == opreg.OpHash && inBytes < specMinHashBytes {
		return
	}
	ins := make([]*asl.Rope, len(node.Inputs))
	for k, in := range node.Inputs {
		ins[k], _ = s.input(in)
	}
	call := opreg.RopeCall{Ctx: s.ctx, Inputs: ins, Params: pl.paramsOf(i)}
	if op.NeedsGlobalParams {
		if s.params == nil || op.RunRope == nil && !s.params.InMemory() {
			return
		}
		call.Global = s.params
	}
	var eager opreg.Call
	if op.RunRope == nil {
		var err error
		if eager, _, err = materialize(s.ctx, call, s.maxMat); err != nil {
			return // the canonical loop reports it
		}
	}
	var declared uint64
	hasDeclared := false
	if sizeFn := op.SizeRope; sizeFn != nil || (op.RunRope == nil && op.OutputSize != nil) {
		if contain(node.ID, node.Op, "size", func() {
			if op.RunRope != nil {
				declared, hasDeclared = sizeFn(call)
			} else {
				declared, hasDeclared = op.OutputSize(eager)
			}
		}) != nil {
			return // the canonical loop reports the panic
		}
	}
	lim, budget := s.opts.Limits.MaxOutputBytes, s.opts.MemoryBudget
	if !hasDeclared {
		if lim > 0 || budget > 0 {
			return // an undeclared output could exceed a bound before it is checked
		}
	} else {
		cur := s.bytes
		if st.hasDeclared {
			cur = satAdd(cur, st.declared)
		}
		if lim > 0 && overLimit(satAdd(st.outputBytes, cur), declared, lim) ||
			budget > 0 && overLimit(satAdd(st.held, cur), declared, budget) ||
			overLimit(s.bytes, declared, specMaxBytes) {
			return
		}
	}
	j := &specJob{node: &node, op: op, call: call, eager: eager, declared: declared, done: make(chan struct{})}
	if !s.started {
		s.start()
	}
	select {
	case s.queue <- j:
	default:
		return // the queue is full of jobs the canonical loop ran itself
	}
	s.jobs[i] = j
	s.bytes += declared
	s.stats.Dispatched++
}

// input resolves a node input whose node, if any, the canonical loop has
// committed; ok is false for an index out of range (which the canonical
// loop will report).
func (s *speculator) input(in DagInput) (*asl.Rope, bool) {
	if in.Kind == InputExternal {
		if uint64(in.InputIndex) >= uint64(len(s.inputs)) {
			return nil, false
		}
		return s.inputs[in.InputIndex], true
	}
	t, _ := s.x.find(in.NodeID)
	o := s.outs.get(t)
	if uint64(in.OutputIndex) >= uint64(len(o)) {
		return nil, false
	}
	return o[in.OutputIndex], true
}

// start launches Workers-1 goroutines; the canonical loop's goroutine is
// the last worker (it runs its own node, and helps while it waits).
func (s *speculator) start() {
	s.started = true
	s.queue = make(chan *specJob, 2*s.maxJobs)
	for range s.opts.Workers - 1 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for j := range s.queue {
				if j.state.CompareAndSwap(jobQueued, jobRunning) {
					j.exec()
				}
			}
		}()
	}
}

// close ends the speculation when the run ends, however it ends: queued
// jobs are cancelled, running ones awaited, the workers stopped. Nothing a
// run started outlives it.
func (s *speculator) close() {
	if s == nil {
		return
	}
	for n, j := range s.jobs {
		s.drop(n, j)
	}
	if s.started {
		close(s.queue)
		s.wg.Wait()
	}
	if specTestHook != nil {
		specTestHook(s.stats)
	}
}
