package pel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/opreg"
)

// NodeEvent reports one node that Exec_DAG reached in canonical order
// (SPECS.md §12.4). Status is StatusOK, or, for the node at which execution
// stopped, StatusInvalidInputs, StatusInvalidProgram or StatusRuntimeFailed
// with the same StatusCode and Diagnostics as the final result. Outputs are
// set only when Status is StatusOK; they are shared with the engine and must
// not be modified. Exec_DAG, ExecDAGWith, Run and RunWith set Outputs (and
// Values); ExecDAGRopes and RunRopes set only Values, the same outputs as
// ropes, whose bytes may still be in a store.
type NodeEvent struct {
	NodeID      NodeID
	Op          opreg.OperationID
	Status      ExecutionStatus
	StatusCode  uint32
	Outputs     []asl.Artifact
	Values      []*asl.Rope
	Diagnostics []DiagnosticEntry
}

// Observer receives NodeEvents synchronously, in canonical order, from the
// goroutine running Exec_DAG. Nodes after a failing node are not reported,
// and no events are sent when validation fails before evaluation.
type Observer interface {
	ObserveNode(NodeEvent)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(NodeEvent)

// ObserveNode calls f(e).
func (f ObserverFunc) ObserveNode(e NodeEvent) { f(e) }

func result(s ExecutionStatus, code uint32, diags ...DiagnosticEntry) ExecutionResultValue {
	return ExecutionResultValue{
		PEL1Version: PEL1Version,
		Status:      s,
		SchemeRef:   SchemeRefDAG1,
		Summary:     ExecutionErrorSummary{Kind: s.Kind(), StatusCode: code},
		Diagnostics: diags,
	}
}

func invalidProgram(d DiagnosticEntry) ExecutionResultValue {
	return result(StatusInvalidProgram, CodeInvalidProgram, d)
}

// ExecDAG is Exec_DAG (seed §5.3, SPECS.md §12): it runs program on inputs
// and the optional global params artifact with the operations of reg (nil
// means opreg.Kernel()), reporting node events to obs (may be nil).
//
// Steps, each ending the execution at the first failure with outputs = []:
//
//  1. program must be tagged 0x00000101 and decode (INVALID_PROGRAM),
//     and be structurally valid (INVALID_PROGRAM);
//  2. every operation must be registered, then per node (ascending id) its
//     input count must fit the operation's arity and its params must decode
//     (INVALID_PROGRAM);
//  3. nodes run in canonical order; per node, DagInputs resolve in order
//     (input_index out of range: INVALID_INPUTS; output_index out of
//     range: INVALID_PROGRAM), then the global params requirement
//     (INVALID_INPUTS), then the operation (an OpError: RUNTIME_FAILED with
//     its status code);
//  4. roots resolve in order (output_index out of range: INVALID_PROGRAM).
//
// ExecDAG does no I/O, reads no clock and uses no randomness: equal
// arguments give equal outputs and results. Outputs may alias bytes of
// program, inputs and params.
//
// ExecDAG has no error result: on an internal failure (ErrInternal, see
// ExecDAGWith) it returns no outputs and the zero ExecutionResultValue,
// whose PEL1Version 0 no real result has. Callers that run operations other
// than the kernel's should use ExecDAGWith.
func ExecDAG(reg *opreg.Registry, program asl.Artifact, inputs []asl.Artifact, params *asl.Artifact, obs Observer) ([]asl.Artifact, ExecutionResultValue) {
	outputs, res, _ := ExecDAGWith(reg, program, inputs, params, obs, RunOptions{})
	return outputs, res
}

// ExecDAGWith is ExecDAG with RunOptions (limits, a node memo, an
// interrupt). Its error is non-nil only when opts.Interrupt aborted the run
// or on an internal failure (ErrInternal, SPECS.md §12.8: an operation
// panicked or broke its size declaration); then there are no outputs and no
// result.
func ExecDAGWith(reg *opreg.Registry, program asl.Artifact, inputs []asl.Artifact, params *asl.Artifact, obs Observer, opts RunOptions) ([]asl.Artifact, ExecutionResultValue, error) {
	pl, res, err := planFor(reg, program)
	if pl == nil {
		return nil, res, err
	}
	return pl.RunWith(inputs, params, obs, opts)
}

// planFor decodes and prepares program (steps 1 and 2 of ExecDAG): a nil
// plan comes with the INVALID_PROGRAM result or the internal error.
func planFor(reg *opreg.Registry, program asl.Artifact) (*Plan, ExecutionResultValue, error) {
	return planArtifact(reg, program, true)
}

// PlanArtifact is steps 1 and 2 of ExecDAG: it decodes program and prepares
// it for reg (nil means opreg.Kernel()). A program that Exec_DAG would
// answer with INVALID_PROGRAM gives a nil Plan and that result; an internal
// failure (an operation's params decoder panicked) a nil Plan and the
// error. The Plan copies what it needs of program's bytes (params, op
// names), so the caller may drop them: a surface run holds the compact
// plan, not the program bytes, while it evaluates (SPECS.md §14.11).
func PlanArtifact(reg *opreg.Registry, program asl.Artifact) (*Plan, ExecutionResultValue, error) {
	return planArtifact(reg, program, false)
}

func planArtifact(reg *opreg.Registry, program asl.Artifact, alias bool) (*Plan, ExecutionResultValue, error) {
	var p *compact
	err := checkProgramTag(program)
	if err == nil {
		p, err = decodeCompact(program.Bytes, alias)
	}
	if err != nil {
		var pe *ProgramError
		if !errors.As(err, &pe) {
			pe = programErr(DiagProgramMalformed, nil, "program bytes malformed")
		}
		return nil, invalidProgram(pe.Diagnostic()), nil
	}
	pl, perr, err := prepare(p, reg)
	if perr != nil {
		return nil, invalidProgram(perr.Diagnostic()), nil
	}
	if err != nil {
		return nil, ExecutionResultValue{}, err
	}
	return pl, ExecutionResultValue{}, nil
}

// Run evaluates the plan (steps 3 and 4 of ExecDAG). It is safe to call
// concurrently; obs is called from the calling goroutine.
func (pl *Plan) Run(inputs []asl.Artifact, params *asl.Artifact, obs Observer) ([]asl.Artifact, ExecutionResultValue) {
	outputs, res, _ := pl.RunWith(inputs, params, obs, RunOptions{})
	return outputs, res
}

// Limits are deterministic bounds on one evaluation (SPECS.md §12.6). Zero
// means unbounded. Exceeding one is RUNTIME_FAILED with StatusLimitNodes or
// StatusLimitOutputBytes, identical on every machine.
type Limits struct {
	// MaxNodes bounds the number of nodes evaluated. Before a node is
	// evaluated (before its inputs resolve), if MaxNodes nodes have been
	// evaluated already, the run stops at that node.
	MaxNodes uint64
	// MaxOutputBytes bounds the total payload bytes of all node outputs.
	// Before an operation whose size is declared (opreg.Operation.OutputSize)
	// runs, and after any other operation returns, if the running total
	// exceeds MaxOutputBytes, the run stops at that node; a declared
	// over-limit output is never allocated.
	MaxOutputBytes uint64
}

// NodeMemo lets a caller reuse node outputs across runs and programs
// (SPECS.md §12.7). Lookup is asked before an operation runs, with exactly
// what the operation would see; Record is told after it succeeds. Because
// operations are pure, a memo that returns what Record was told for the same
// (operation, params bytes, inputs, global params) leaves every output,
// result and trace byte unchanged. A memo does its own I/O; Exec_DAG stays
// pure with respect to its arguments.
type NodeMemo interface {
	Lookup(op OperationID, params []byte, inputs []asl.Artifact, global *asl.Artifact) ([]asl.Artifact, bool)
	Record(op OperationID, params []byte, inputs []asl.Artifact, global *asl.Artifact, outputs []asl.Artifact)
}

// RunOptions extend an evaluation beyond the seed.
type RunOptions struct {
	Limits Limits
	Memo   NodeMemo
	// Interrupt, if set, is called before each node; a non-nil error aborts
	// the evaluation with that error and no result (an operational
	// failure outside the model, such as a wall-time bound).
	Interrupt func() error
	// MemoryBudget, if non-zero, bounds the payload bytes of node outputs
	// the evaluation holds at once (outputs are released when their last
	// reader has run; roots are held to the end). It is an operational
	// bound of the machine, not a limit of the model: before an operation
	// whose size is declared would bring the held bytes above it, the
	// evaluation stops with ErrOutOfMemory and no result (SPECS.md §12.8).
	MemoryBudget uint64
	// Context bounds the store reads of ropes (RunRopes); nil means
	// context.Background().
	Context context.Context
	// MaxMaterialize bounds, in bytes, one value that RunRopes reads into
	// memory for an operation without RunRope; zero means unbounded.
	MaxMaterialize int64
	// RopeMemo is the node memo of RunRopes. RunWith uses Memo when
	// RopeMemo is nil.
	RopeMemo RopeMemo
	// Workers, above 1, lets the evaluation run operations of later nodes
	// whose inputs are available ahead of the canonical order, on up to
	// Workers goroutines (SPECS.md §12.10); the canonical order still
	// decides everything, so outputs, result, observer events and error are
	// those of the sequential evaluation. 0 or 1: sequential.
	Workers int
	// WorkBudget, if non-zero, bounds the total payload bytes of all node
	// outputs of the evaluation: the bytes an evaluation on ropes must hash
	// for the trace or store, even when it holds none of them. Like
	// MemoryBudget it is an operational bound outside the model (SPECS.md
	// §12.8): it is checked after the deterministic limits, before an
	// operation whose size is declared runs and after any other operation
	// returns, and exceeding it stops the evaluation with ErrWorkBudget and
	// no result.
	WorkBudget uint64
}

// ErrOutOfMemory is returned (wrapped in an *InternalError, so it also
// matches ErrInternal) when a node's declared outputs do not fit
// RunOptions.MemoryBudget.
var ErrOutOfMemory = errors.New("out of memory")

// ErrWorkBudget is returned (wrapped in an *InternalError, so it also
// matches ErrInternal) when a node's outputs would bring the evaluation's
// total output bytes above RunOptions.WorkBudget.
var ErrWorkBudget = errors.New("work budget exceeded")

// RunWith is Run with limits, a node memo and an interrupt. Its error is
// non-nil only when Interrupt aborted the evaluation or on an internal
// failure. It evaluates with ropes in memory (RunRopes) and reads every
// root output, and every output an observer is shown, into one slice at
// the edge, so what it returns is what an evaluation on byte slices
// returns; MemoryBudget counts every output's payload bytes.
func (pl *Plan) RunWith(inputs []asl.Artifact, params *asl.Artifact, obs Observer, opts RunOptions) ([]asl.Artifact, ExecutionResultValue, error) {
	ropes := make([]*asl.Rope, len(inputs))
	for i, in := range inputs {
		ropes[i] = asl.NewRope(in)
	}
	var global *asl.Rope
	if params != nil {
		global = asl.NewRope(*params)
	}
	if obs != nil {
		inner := obs
		obs = ObserverFunc(func(ev NodeEvent) {
			if ev.Values != nil && ev.Outputs == nil {
				ev.Outputs = make([]asl.Artifact, len(ev.Values))
				for k, v := range ev.Values {
					ev.Outputs[k] = inMemory(v)
				}
			}
			inner.ObserveNode(ev)
		})
	}
	if opts.RopeMemo == nil && opts.Memo != nil {
		opts.RopeMemo = artifactMemo{opts.Memo}
	}
	outs, res, err := pl.run(ropes, global, obs, opts, true)
	if err != nil || outs == nil {
		return nil, res, err
	}
	arts := make([]asl.Artifact, len(outs))
	for k, o := range outs {
		arts[k] = inMemory(o)
	}
	return arts, res, nil
}

// inMemory reads a rope whose segments are all in memory into one slice
// (no I/O, so no failure).
func inMemory(r *asl.Rope) asl.Artifact {
	a, err := r.Artifact(context.Background(), math.MaxInt64)
	if err != nil {
		panic(fmt.Sprintf("pel: reading an in-memory rope: %v", err))
	}
	return a
}

// artifactMemo adapts a NodeMemo to the ropes of RunWith, which are all in
// memory.
type artifactMemo struct{ m NodeMemo }

func inMemoryAll(rs []*asl.Rope) []asl.Artifact {
	arts := make([]asl.Artifact, len(rs))
	for k, r := range rs {
		arts[k] = inMemory(r)
	}
	return arts
}

func inMemoryGlobal(g *asl.Rope) *asl.Artifact {
	if g == nil {
		return nil
	}
	a := inMemory(g)
	return &a
}

func (a artifactMemo) LookupRopes(op OperationID, params []byte, inputs []*asl.Rope, global *asl.Rope) ([]*asl.Rope, bool) {
	outs, ok := a.m.Lookup(op, params, inMemoryAll(inputs), inMemoryGlobal(global))
	if !ok {
		return nil, false
	}
	rs := make([]*asl.Rope, len(outs))
	for k, o := range outs {
		rs[k] = asl.NewRope(o)
	}
	return rs, true
}

func (a artifactMemo) RecordRopes(op OperationID, params []byte, inputs []*asl.Rope, global *asl.Rope, outputs []*asl.Rope) {
	a.m.Record(op, params, inMemoryAll(inputs), inMemoryGlobal(global), inMemoryAll(outputs))
}

// RopeMemo is NodeMemo for RunRopes: the same contract over ropes.
type RopeMemo interface {
	LookupRopes(op OperationID, params []byte, inputs []*asl.Rope, global *asl.Rope) ([]*asl.Rope, bool)
	RecordRopes(op OperationID, params []byte, inputs []*asl.Rope, global *asl.Rope, outputs []*asl.Rope)
}

// RunRopes is RunWith over ropes (SPECS.md §12.9): inputs, params and
// outputs may refer to stored artifacts, operations with RunRope (the
// kernel's) produce outputs that refer to their inputs' bytes, and only an
// operation without RunRope has its inputs read into memory (each refused
// above opts.MaxMaterialize, an internal failure wrapping ErrOutOfMemory).
// The result, every output's bytes and every event are those RunWith gives
// for the same values. Node events carry Values, not Outputs. MemoryBudget
// counts the bytes held in one in-memory slice (asl.Rope.InMemory): before
// an operation without RunRope, its declared outputs and the inputs it
// reads into memory; after any operation, its in-memory outputs.
// An error reading a stored value (I/O, integrity) ends the evaluation with
// that error and no result.
func (pl *Plan) RunRopes(inputs []*asl.Rope, params *asl.Rope, obs Observer, opts RunOptions) ([]*asl.Rope, ExecutionResultValue, error) {
	return pl.run(inputs, params, obs, opts, false)
}

// ExecDAGRopes is ExecDAGWith over ropes (see Plan.RunRopes).
func ExecDAGRopes(reg *opreg.Registry, program asl.Artifact, inputs []*asl.Rope, params *asl.Rope, obs Observer, opts RunOptions) ([]*asl.Rope, ExecutionResultValue, error) {
	pl, res, err := planFor(reg, program)
	if pl == nil {
		return nil, res, err
	}
	return pl.RunRopes(inputs, params, obs, opts)
}

// run evaluates the plan. logical makes MemoryBudget count every output's
// payload bytes (RunWith materialises them all at the edge).
func (pl *Plan) run(inputs []*asl.Rope, params *asl.Rope, obs Observer, opts RunOptions, logical bool) ([]*asl.Rope, ExecutionResultValue, error) {
	n := pl.c.len()
	x := newNodeIndex(pl.c.ids)
	outs := newLiveOuts(n)
	// remaining[t] counts the references to node t not yet resolved; at
	// zero its outputs are dropped so long chains do not pin every
	// intermediate artifact.
	remaining := slices.Clone(pl.g.uses)
	var scratch []*asl.Rope
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	maxMat := opts.MaxMaterialize
	if maxMat <= 0 {
		maxMat = math.MaxInt64
	}

	stop := func(node *Node, s ExecutionStatus, code uint32, diags ...DiagnosticEntry) ([]*asl.Rope, ExecutionResultValue, error) {
		if obs != nil {
			obs.ObserveNode(NodeEvent{NodeID: node.ID, Op: node.Op, Status: s, StatusCode: code, Diagnostics: diags})
		}
		return nil, result(s, code, diags...), nil
	}
	var evaluated, outputBytes, held uint64
	sp := newSpeculator(pl, inputs, params, outs, opts, maxMat)
	defer sp.close()

	for _, i := range pl.g.order {
		nodeV, op := pl.c.node(int(i)), pl.opOf(i)
		node := &nodeV
		if opts.Interrupt != nil {
			if err := opts.Interrupt(); err != nil {
				return nil, ExecutionResultValue{}, err
			}
		}
		if opts.Limits.MaxNodes > 0 && evaluated == opts.Limits.MaxNodes {
			return stop(node, StatusRuntimeFailed, StatusLimitNodes, diag(DiagLimitNodes,
				"node %d: node limit %d reached", node.ID, opts.Limits.MaxNodes))
		}
		evaluated++
		scratch = scratch[:0]
		for j, in := range node.Inputs {
			if in.Kind == InputExternal {
				if uint64(in.InputIndex) >= uint64(len(inputs)) {
					return stop(node, StatusInvalidInputs, CodeInvalidInputs, diag(DiagMissingInput,
						"node %d input %d: external input index %d out of range (%d inputs given)", node.ID, j, in.InputIndex, len(inputs)))
				}
				scratch = append(scratch, inputs[in.InputIndex])
				continue
			}
			t, _ := x.find(in.NodeID)
			o := outs.get(t)
			if uint64(in.OutputIndex) >= uint64(len(o)) {
				return stop(node, StatusInvalidProgram, CodeInvalidProgram, diag(DiagNodeOutputIndex,
					"node %d input %d: node %d has %d outputs, output index %d out of range", node.ID, j, in.NodeID, len(o), in.OutputIndex))
			}
			scratch = append(scratch, o[in.OutputIndex])
		}
		call := opreg.RopeCall{Ctx: ctx, Inputs: scratch, Params: pl.paramsOf(i)}
		if op.NeedsGlobalParams {
			if params == nil {
				return stop(node, StatusInvalidInputs, CodeInvalidInputs, diag(DiagMissingGlobal,
					"node %d: operation %s needs the global params artifact, none given", node.ID, opText(node.Op)))
			}
			call.Global = params
		}
		// An operation without RunRope sees its inputs in memory.
		var eager opreg.Call
		var readIn uint64 // bytes read into memory for it
		if op.RunRope == nil {
			var err error
			if eager, readIn, err = materialize(ctx, call, maxMat); err != nil {
				return nil, ExecutionResultValue{}, nodeReadError(node, err)
			}
		}
		// A declared size is checked against the limit before anything is
		// allocated for the outputs: the same check, with the same total,
		// that would follow Run (the declaration is exact, and made only
		// when Run succeeds), so the bytes of the result do not depend on it.
		var declared uint64
		hasDeclared := false
		if sizeFn := op.SizeRope; sizeFn != nil || (op.RunRope == nil && op.OutputSize != nil) {
			if ierr := contain(node.ID, node.Op, "size", func() {
				if op.RunRope != nil {
					declared, hasDeclared = sizeFn(call)
				} else {
					declared, hasDeclared = op.OutputSize(eager)
				}
			}); ierr != nil {
				return nil, ExecutionResultValue{}, ierr
			}
		}
		if hasDeclared && opts.Limits.MaxOutputBytes > 0 && overLimit(outputBytes, declared, opts.Limits.MaxOutputBytes) {
			return stop(node, StatusRuntimeFailed, StatusLimitOutputBytes, diag(DiagLimitOutputBytes,
				"node %d: outputs total %d bytes, above the limit of %d", node.ID, satAdd(outputBytes, declared), opts.Limits.MaxOutputBytes))
		}
		if ierr := budgetCheck(node, opts.MemoryBudget, logical, op.RunRope != nil, hasDeclared, declared, readIn, held); ierr != nil {
			return nil, ExecutionResultValue{}, ierr
		}
		if hasDeclared {
			if ierr := workCheck(node, opts.WorkBudget, outputBytes, declared); ierr != nil {
				return nil, ExecutionResultValue{}, ierr
			}
		}
		var res []*asl.Rope
		var oerr *opreg.OpError
		memoHit := false
		if opts.RopeMemo != nil {
			res, memoHit = opts.RopeMemo.LookupRopes(node.Op, node.Params, scratch, call.Global)
		}
		if !memoHit {
			var rerr error
			var ierr *InternalError
			res, oerr, rerr, ierr = sp.runOp(pl, i, call, eager, runState{held: held, outputBytes: outputBytes, declared: declared, hasDeclared: hasDeclared})
			if ierr != nil {
				return nil, ExecutionResultValue{}, ierr
			}
			if rerr != nil {
				return nil, ExecutionResultValue{}, nodeReadError(node, rerr)
			}
		}
		if oerr != nil && hasDeclared {
			return nil, ExecutionResultValue{}, &InternalError{NodeID: node.ID, Op: node.Op,
				Reason: fmt.Sprintf("declared %d output bytes, then failed with status code 0x%08x", declared, oerr.StatusCode)}
		}
		if oerr != nil {
			code := oerr.StatusCode
			var lead DiagnosticEntry
			if code < opreg.FirstOperationCode {
				lead = diag(DiagOperationContract, "node %d: operation %s returned reserved status code %d", node.ID, opText(node.Op), code)
				code = StatusOperationContract
			} else {
				lead = diag(DiagNodeFailed, "node %d: operation %s failed with status code 0x%08x", node.ID, opText(node.Op), code)
			}
			diags := make([]DiagnosticEntry, 0, 1+len(oerr.Diagnostics))
			diags = append(append(diags, lead), oerr.Diagnostics...)
			return stop(node, StatusRuntimeFailed, code, diags...)
		}
		var produced, holds uint64
		for _, out := range res {
			produced += out.Size()
			if logical || out.InMemory() {
				holds += out.Size()
			}
		}
		if hasDeclared && produced != declared {
			return nil, ExecutionResultValue{}, &InternalError{NodeID: node.ID, Op: node.Op,
				Reason: fmt.Sprintf("declared %d output bytes, produced %d", declared, produced)}
		}
		if !logical && opts.MemoryBudget > 0 && overLimit(held, holds, opts.MemoryBudget) {
			return nil, ExecutionResultValue{}, &InternalError{NodeID: node.ID, Op: node.Op, Value: ErrOutOfMemory,
				Reason: fmt.Sprintf("out of memory: %d output bytes in memory with %d held, above the memory budget of %d", holds, held, opts.MemoryBudget)}
		}
		outputBytes += produced
		if opts.Limits.MaxOutputBytes > 0 && outputBytes > opts.Limits.MaxOutputBytes {
			return stop(node, StatusRuntimeFailed, StatusLimitOutputBytes, diag(DiagLimitOutputBytes,
				"node %d: outputs total %d bytes, above the limit of %d", node.ID, outputBytes, opts.Limits.MaxOutputBytes))
		}
		if ierr := workCheck(node, opts.WorkBudget, outputBytes-produced, produced); ierr != nil {
			return nil, ExecutionResultValue{}, ierr
		}
		if opts.RopeMemo != nil && !memoHit {
			opts.RopeMemo.RecordRopes(node.Op, node.Params, scratch, call.Global, res)
		}
		for _, in := range node.Inputs {
			if in.Kind == InputNode {
				t, _ := x.find(in.NodeID)
				if remaining[t]--; remaining[t] == 0 {
					held -= outs.release(t)
				}
			}
		}
		if remaining[i] > 0 {
			outs.set(i, res, holds)
			held += holds
		}
		if obs != nil {
			obs.ObserveNode(NodeEvent{NodeID: node.ID, Op: node.Op, Status: StatusOK, Values: res})
		}
	}

	outputs := make([]*asl.Rope, 0, len(pl.c.roots))
	for k, r := range pl.c.roots {
		t, _ := x.find(r.NodeID)
		o := outs.get(t)
		if uint64(r.OutputIndex) >= uint64(len(o)) {
			return nil, invalidProgram(diag(DiagRootOutputIndex,
				"root %d: node %d has %d outputs, output index %d out of range", k, r.NodeID, len(o), r.OutputIndex)), nil
		}
		outputs = append(outputs, o[r.OutputIndex])
	}
	return outputs, result(StatusOK, CodeOK), nil
}

// runOp applies op: RunRope when it has one, else Run on the inputs read
// into memory.
func runOp(op *opreg.Operation, call opreg.RopeCall, eager opreg.Call) ([]*asl.Rope, *opreg.OpError, error) {
	if op.RunRope != nil {
		return op.RunRope(call)
	}
	arts, oerr := op.Run(eager)
	if oerr != nil {
		return nil, oerr, nil
	}
	res := make([]*asl.Rope, len(arts))
	for k, a := range arts {
		res[k] = asl.NewRope(a)
	}
	return res, nil, nil
}

// materialize reads the call's inputs and global params into memory for an
// operation without RunRope; read counts the bytes it allocated.
func materialize(ctx context.Context, c opreg.RopeCall, limit int64) (call opreg.Call, read uint64, err error) {
	get := func(r *asl.Rope) (asl.Artifact, error) {
		if !r.InMemory() {
			read += r.Size()
		}
		return r.Artifact(ctx, limit)
	}
	call = opreg.Call{Inputs: make([]asl.Artifact, len(c.Inputs)), Params: c.Params}
	for k, in := range c.Inputs {
		if call.Inputs[k], err = get(in); err != nil {
			return opreg.Call{}, 0, fmt.Errorf("input %d: %w", k, err)
		}
	}
	if c.Global != nil {
		g, err := get(c.Global)
		if err != nil {
			return opreg.Call{}, 0, fmt.Errorf("global params: %w", err)
		}
		call.Global = &g
	}
	return call, read, nil
}

// nodeReadError is the error of a failed read of a node's values: an
// internal failure wrapping ErrOutOfMemory for a value above the
// materialisation limit, else the store's error, wrapped.
func nodeReadError(node *Node, err error) error {
	if errors.Is(err, asl.ErrTooLarge) {
		return &InternalError{NodeID: node.ID, Op: node.Op, Value: ErrOutOfMemory, Reason: err.Error()}
	}
	return fmt.Errorf("node %d: operation %s: %w", node.ID, opText(node.Op), err)
}

// budgetCheck applies RunOptions.MemoryBudget before a node runs. With
// logical counting (RunWith) a declared output counts its payload bytes;
// otherwise an operation with RunRope allocates nothing that counts, and
// one without counts its declared outputs plus the inputs read for it.
func budgetCheck(node *Node, budget uint64, logical, lazy, hasDeclared bool, declared, readIn, held uint64) error {
	if budget == 0 || !hasDeclared || (!logical && lazy) {
		return nil
	}
	if logical {
		if overLimit(held, declared, budget) {
			return &InternalError{NodeID: node.ID, Op: node.Op, Value: ErrOutOfMemory,
				Reason: fmt.Sprintf("out of memory: %d output bytes declared with %d held, above the memory budget of %d", declared, held, budget)}
		}
		return nil
	}
	if need := satAdd(declared, readIn); overLimit(held, need, budget) {
		return &InternalError{NodeID: node.ID, Op: node.Op, Value: ErrOutOfMemory,
			Reason: fmt.Sprintf("out of memory: %d output bytes declared and %d input bytes read into memory with %d held, above the memory budget of %d", declared, readIn, held, budget)}
	}
	return nil
}

// workCheck applies RunOptions.WorkBudget (0: none) to a node adding more
// output bytes to the total before it.
func workCheck(node *Node, budget, total, more uint64) error {
	if budget == 0 || !overLimit(total, more, budget) {
		return nil
	}
	return &InternalError{NodeID: node.ID, Op: node.Op, Value: ErrWorkBudget,
		Reason: fmt.Sprintf("work budget exceeded: outputs would total %d bytes, above the work budget of %d", satAdd(total, more), budget)}
}

// overLimit reports whether total + more exceeds max, without overflow.
func overLimit(total, more, max uint64) bool {
	return more > max || total > max-more
}

// satAdd is a + b, saturated at the largest uint64.
func satAdd(a, b uint64) uint64 {
	if a+b < a {
		return ^uint64(0)
	}
	return a + b
}

func diag(code uint32, format string, args ...any) DiagnosticEntry {
	return DiagnosticEntry{Code: code, Message: fmt.Appendf(nil, format, args...)}
}

// liveOuts holds the outputs of the nodes that are still to be read: per
// node a slot number (0: none), slots reused once released. A run holds 4
// bytes per node plus a slot per node whose outputs are live, rather than
// a slice header per node (SPECS.md §14.11).
type liveOuts struct {
	slot  []uint32      // per node index: 1 + index into vals, or 0
	vals  [][]*asl.Rope // per slot: the outputs
	sizes []uint64      // per slot: the bytes they hold
	free  []uint32      // released slots
}

func newLiveOuts(n int) *liveOuts { return &liveOuts{slot: make([]uint32, n)} }

// get returns node t's outputs (nil when it has none live).
func (o *liveOuts) get(t int32) []*asl.Rope {
	if k := o.slot[t]; k > 0 {
		return o.vals[k-1]
	}
	return nil
}

// set keeps the outputs of node t, which holds size bytes of them.
func (o *liveOuts) set(t int32, v []*asl.Rope, size uint64) {
	var k uint32
	if n := len(o.free); n > 0 {
		k = o.free[n-1]
		o.free = o.free[:n-1]
		o.vals[k-1], o.sizes[k-1] = v, size
	} else {
		o.vals = append(o.vals, v)
		o.sizes = append(o.sizes, size)
		k = uint32(len(o.vals))
	}
	o.slot[t] = k
}

// release drops node t's outputs and returns the bytes they held.
func (o *liveOuts) release(t int32) uint64 {
	k := o.slot[t]
	if k == 0 {
		return 0
	}
	size := o.sizes[k-1]
	o.vals[k-1], o.sizes[k-1], o.slot[t] = nil, 0, 0
	o.free = append(o.free, k)
	return size
}
