package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/pebblestore"
)

func init() { addCommand(newPutCmd) }

// Limits of the put path. Inputs up to putStreamThreshold bytes are read
// into memory and stored through PutBatch, in batches of at most
// putBatchBytes payload bytes and putBatchCount artifacts (one durability
// barrier per batch); larger inputs stream through Put one at a time, so
// memory stays bounded by these constants whatever the input size.
const (
	putBatchBytes      = 64 << 20
	putBatchCount      = 4096
	putStreamThreshold = 4 << 20
)

// typeTagValue is the --type-tag flag: decimal, or hexadecimal with 0x.
type typeTagValue struct {
	set bool
	tag asl.TypeTag
}

func (v *typeTagValue) String() string {
	if !v.set {
		return ""
	}
	return fmt.Sprintf("0x%08x", uint32(v.tag))
}

func (v *typeTagValue) Set(s string) error {
	t, err := parseTypeTag(s)
	if err != nil {
		return err
	}
	v.set, v.tag = true, t
	return nil
}

func (v *typeTagValue) Type() string { return "N" }

// parseTypeTag accepts a decimal number or 0x followed by hex digits, in
// [0, 2^32-1]. A leading 0 does not mean octal.
func parseTypeTag(s string) (asl.TypeTag, error) {
	digits, base := s, 10
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		digits, base = h, 16
	}
	if digits == "" || strings.ContainsAny(digits, "+-_") {
		return 0, fmt.Errorf("type tag %q: want a decimal number or 0x followed by hex digits", s)
	}
	n, err := strconv.ParseUint(digits, base, 32)
	if err != nil {
		return 0, fmt.Errorf("type tag %q: want a number in [0, 4294967295] (decimal or 0x hex)", s)
	}
	return asl.TypeTag(n), nil
}

// putItem is one stored input, as printed by put --json.
type putItem struct {
	Source   string        `json:"source"`
	Ref      asl.Reference `json:"ref"`
	Size     uint64        `json:"size"`
	TypeTag  *uint32       `json:"type_tag"`
	Streamed bool          `json:"streamed"`
}

// pendingInput is what the putter keeps beside one artifact waiting for
// its batch.
type pendingInput struct {
	src string
	// want, when not zero, is the reference the caller derived before the
	// store did (put -r's trees name it): flush fails with exit 4 if the
	// store returns another.
	want asl.Reference
	// quiet inputs are stored and not emitted: put -r's trees and symbolic
	// link targets, printed (the root tree) or not by their caller.
	quiet bool
}

type putStore interface {
	asl.Receiver
	asl.BatchReceiver
}

// putter stores inputs in order, batching small ones and streaming large
// ones, and emits one putItem per input in input order.
type putter struct {
	store  putStore
	hash   asl.HashID
	hasTag bool
	tag    asl.TypeTag
	stdin  io.Reader
	emit   func(putItem) error

	// Limits; zero means the put* constants (treeDerive: treeDeriveBytes,
	// negative: none). Tests lower them.
	batchBytes, batchCount, streamAbove, treeDerive int64

	pending      []asl.Artifact
	pendingIn    []pendingInput // pendingIn[i] describes pending[i]
	pendingBytes int64

	batches, streamed int // counts, for reporting
}

func (p *putter) limits() (batchBytes, batchCount, streamAbove int64) {
	batchBytes, batchCount, streamAbove = p.batchBytes, p.batchCount, p.streamAbove
	if batchBytes <= 0 {
		batchBytes = putBatchBytes
	}
	if batchCount <= 0 {
		batchCount = putBatchCount
	}
	if streamAbove <= 0 {
		streamAbove = putStreamThreshold
	}
	return
}

func (p *putter) header(size uint64) asl.Header {
	return asl.Header{Size: size, Tag: p.tag, HasTag: p.hasTag}
}

func (p *putter) item(src string, ref asl.Reference, size uint64, streamed bool) putItem {
	it := putItem{Source: src, Ref: ref, Size: size, Streamed: streamed}
	if p.hasTag {
		t := uint32(p.tag)
		it.TypeTag = &t
	}
	return it
}

// add stores the file src, or standard input when src is "-".
func (p *putter) add(ctx context.Context, src string) error {
	if src == "-" {
		if f, ok := p.stdin.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.IsDir() {
				return fail(exitUsage, "-", errors.New("standard input is a directory (put -r DIR stores the files under a directory)"))
			}
		}
		size, known := regularSize(p.stdin)
		return p.addReader(ctx, "-", p.stdin, size, known)
	}
	_, err := p.addFile(ctx, src)
	return err
}

// addFile puts the file src and returns its mode, from the same fstat that
// gave its size (put -r takes the executable bit from it rather than
// stating every file a second time).
func (p *putter) addFile(ctx context.Context, src string) (fs.FileMode, error) {
	f, err := openForRead(src)
	if err != nil {
		return 0, fail(exitIO, src, unwrapPathError(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fail(exitIO, src, unwrapPathError(err))
	}
	if st.IsDir() {
		return 0, fail(exitUsage, src, errors.New("is a directory (put -r stores the files under it)"))
	}
	return st.Mode(), p.addReader(ctx, src, f, st.Size(), st.Mode().IsRegular())
}

// regularSize returns the bytes left in r when it is a regular file.
func regularSize(r io.Reader) (int64, bool) {
	f, ok := r.(*os.File)
	if !ok {
		return 0, false
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0, false
	}
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil || off > st.Size() {
		return 0, false
	}
	return st.Size() - off, true
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

func (p *putter) addReader(ctx context.Context, src string, r io.Reader, size int64, known bool) error {
	_, _, streamAbove := p.limits()
	if known && size > streamAbove {
		return p.stream(ctx, src, r, uint64(size))
	}
	if known {
		data := make([]byte, size)
		if _, err := io.ReadFull(r, data); err != nil {
			return fail(exitIO, src, fmt.Errorf("reading: %w (did the file shrink?)", err))
		}
		if n, _ := r.Read(make([]byte, 1)); n != 0 {
			return fail(exitIO, src, errors.New("file grew while it was read"))
		}
		return p.addSmall(ctx, src, data)
	}
	head, err := io.ReadAll(io.LimitReader(r, streamAbove+1))
	if err != nil {
		return fail(exitIO, src, fmt.Errorf("reading: %w", err))
	}
	if int64(len(head)) <= streamAbove {
		return p.addSmall(ctx, src, head)
	}
	// Size unknown and large: spool to a temporary file to learn the size
	// that Put needs up front.
	tmp, release, err := createTemp("", "amduat-put-*")
	if err != nil {
		return fail(exitIO, src, fmt.Errorf("spooling: %w", err))
	}
	defer release()
	defer tmp.Close()
	if _, err := tmp.Write(head); err != nil {
		return fail(exitIO, src, fmt.Errorf("spooling: %w", err))
	}
	n, err := io.Copy(tmp, ctxReader{ctx, r})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fail(exitIO, src, fmt.Errorf("spooling: %w", err))
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fail(exitIO, src, fmt.Errorf("spooling: %w", err))
	}
	return p.stream(ctx, src, tmp, uint64(len(head))+uint64(n))
}

func (p *putter) addSmall(ctx context.Context, src string, data []byte) error {
	return p.queue(ctx, asl.Artifact{Bytes: data, Tag: p.tag, HasTag: p.hasTag}, pendingInput{src: src})
}

// addQuiet queues a, whose reference the caller derived as want, for the
// next batch without emitting it (put -r's trees and link targets: they
// share the files' last durable commit when they fit in it). src names it
// in errors.
func (p *putter) addQuiet(ctx context.Context, src string, a asl.Artifact, want asl.Reference) error {
	return p.queue(ctx, a, pendingInput{src: src, want: want, quiet: true})
}

// queue adds a to the pending batch, storing the batch first when a would
// take it past the batch limits.
func (p *putter) queue(ctx context.Context, a asl.Artifact, in pendingInput) error {
	batchBytes, batchCount, _ := p.limits()
	if int64(len(p.pending)) >= batchCount || p.pendingBytes+int64(len(a.Bytes)) > batchBytes {
		if err := p.flush(ctx); err != nil {
			return err
		}
	}
	p.pending = append(p.pending, a)
	p.pendingIn = append(p.pendingIn, in)
	p.pendingBytes += int64(len(a.Bytes))
	return nil
}

func (p *putter) stream(ctx context.Context, src string, r io.Reader, size uint64) error {
	if err := p.flush(ctx); err != nil {
		return err
	}
	ref, err := p.store.Put(ctx, p.hash, p.header(size), r)
	if err != nil {
		return failAuto(src, err)
	}
	p.streamed++
	return p.emit(p.item(src, ref, size, true))
}

// flush stores the pending small inputs with one PutBatch.
func (p *putter) flush(ctx context.Context) error {
	if len(p.pending) == 0 {
		return nil
	}
	refs, err := p.store.PutBatch(ctx, p.hash, p.pending)
	if err != nil {
		subject := p.pendingIn[0].src
		if len(p.pending) > 1 {
			subject = fmt.Sprintf("%s (batch of %d inputs)", subject, len(p.pending))
		}
		return failAuto(subject, err)
	}
	if len(refs) != len(p.pending) {
		return fail(exitIO, p.pendingIn[0].src, fmt.Errorf("store returned %d references for %d artifacts", len(refs), len(p.pending)))
	}
	p.batches++
	for i, ref := range refs {
		in := p.pendingIn[i]
		if !in.want.IsZero() && ref != in.want {
			return fail(exitIntegrity, in.src, fmt.Errorf("store returned %s for an artifact whose reference is %s: %w", ref, in.want, asl.ErrIntegrity))
		}
		if in.quiet {
			continue
		}
		if err := p.emit(p.item(in.src, ref, uint64(len(p.pending[i].Bytes)), false)); err != nil {
			return err
		}
	}
	clear(p.pending)
	clear(p.pendingIn)
	p.pending, p.pendingIn, p.pendingBytes = p.pending[:0], p.pendingIn[:0], 0
	return nil
}

type putResult struct {
	Hash      string     `json:"hash"`
	Artifacts []putItem  `json:"artifacts"`
	Trees     []treeItem `json:"trees,omitempty"` // put -r: one per DIR
	Pin       *asl.Pin   `json:"pin,omitempty"`   // put --pin
}

func newPutCmd(a *app) *cobra.Command {
	var (
		tag                         typeTagValue
		hashName                    string
		names, recursive, stdinList bool
		excludes, excludeFrom       []string
		pinName                     string // put --pin (pinlog.go)
		pinForce                    bool
	)
	c := &cobra.Command{
		Use:   "put [--type-tag N] [--hash sha256|blake3] [--names] [-r [--exclude PATTERN]... [--exclude-from FILE]] [FILE|DIR...] | --stdin-paths",
		Short: "Store files (or stdin) as artifacts and print their references",
		Long: `Store each FILE as an artifact and print its reference, one per line, in
input order. With no FILE, or FILE "-", read standard input.

--type-tag N gives every artifact the type tag N (decimal, or hex with 0x);
without it the artifacts are untagged. --hash chooses the hash (default: the
store's, set at init).

Files up to 4 MiB are stored through the batch path (one durable commit per
64 MiB of input); larger files stream with bounded memory. Standard input that
is not a regular file and exceeds 4 MiB is spooled to a temporary file in
$TMPDIR first, because a put needs the size up front.

--names prints "REF NAME" lines (NAME: the file as given, "-" for standard
input), as ipfs add does. --stdin-paths reads file names from standard input, one per
line, instead of the arguments (as git hash-object --stdin-paths), so that
any number of files take one process and the batch path.

-r stores a snapshot of each DIR: every regular file under it (printed as
above, in lexical path order), each symbolic link as a link (its target
stored as an artifact, never followed), and one directory artifact per
directory (TREE/1, SPECS.md §19.9: names, kinds, the executable bit, sizes
and references; no times or owners, so the same content gives the same
reference). The DIR's tree reference is printed last ("REF DIR" with
--names). FIFOs, sockets and devices are skipped, with a count on stderr.
--exclude PATTERN (repeatable) and --exclude-from FILE leave out paths
matching gitignore patterns, relative to DIR (e.g. '*.o', 'build/',
'/TODO', 'docs/**/*.tmp', '!keep.o'); an excluded directory is not read.
"amduat get -r TREE -o DIR" restores it, "amduat ls TREE", "amduat diff"
and TREE:path read it.

--pin NAME pins what is put as NAME (SPECS.md §19.8) in the same step: no
garbage collection runs between the put and the pin, and nothing is printed
before both are durable. One FILE (or standard input) pins its artifact,
one DIR with -r its tree; several FILEs and DIRs become one tree holding
each under its base name (printed last), which is pinned.
Re-pointing a NAME that names another reference needs --force (exit 1
without it; the artifact stays stored). --json adds "pin": {"name", "ref"}.`,
		Example: `  amduat put notes.txt photo.jpg
  printf hello | amduat put
  amduat put --type-tag 0x101 --hash blake3 program.bin
  amduat put -r --exclude '*.o' --exclude .git/ src | tail -n 1   # the tree
  amduat put --pin notes notes.txt
  amduat put -r --pin backup/home ~/notes`,
		RunE: func(c *cobra.Command, args []string) (err error) {
			if stdinList && len(args) > 0 {
				return usagef("--stdin-paths takes no arguments, got %d", len(args))
			}
			if len(args) == 0 && !stdinList {
				args = []string{"-"}
			}
			dashes := 0
			for _, s := range args {
				if s == "-" {
					dashes++
				}
			}
			if dashes > 1 {
				return usagef("standard input (-) can be given only once")
			}
			var x *excluder
			if len(excludes)+len(excludeFrom) > 0 {
				if !recursive {
					return usageErr(errExcludeNeedsR)
				}
				x = &excluder{}
				for _, pat := range excludes {
					if err := x.add(pat); err != nil {
						return usageErr(err)
					}
				}
				for _, f := range excludeFrom {
					if err := x.addFile(f); err != nil {
						return fail(exitUsage, f, unwrapPathError(err))
					}
				}
			}
			if pinName != "" {
				if stdinList || len(args) > 1 && dashes > 0 {
					return usagef("--pin takes FILEs and DIRs (with -r) or standard input alone, not --stdin-paths")
				}
				if err := pebblestore.CheckPinName(pinName); err != nil {
					return usageErr(err)
				}
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			id := s.DefaultHash()
			if hashName != "" {
				alg, err := hashFlag(hashName)
				if err != nil {
					return err
				}
				id = alg.ID
			}
			alg, _ := asl.LookupHash(id)
			res := putResult{Hash: alg.Short, Artifacts: []putItem{}}
			// With --pin, what put prints waits until the pin is durable.
			var stdout io.Writer = a.stdout
			var held bytes.Buffer
			if pinName != "" {
				stdout = &held
			}
			pinTop := newPinTops(args, recursive)
			p := &putter{store: s, hash: id, hasTag: tag.set, tag: tag.tag, stdin: a.stdin,
				emit: func(it putItem) error {
					pinTop.file(it)
					if a.jsonOut {
						res.Artifacts = append(res.Artifacts, it)
						return nil
					}
					var err error
					if names {
						_, err = fmt.Fprintf(stdout, "%s %s\n", it.Ref, it.Source)
					} else {
						_, err = fmt.Fprintln(stdout, it.Ref)
					}
					if err != nil {
						return fail(exitIO, "stdout", err)
					}
					return nil
				}}
			ctx := c.Context()
			putAll := func(ctx context.Context) error {
				if stdinList {
					err := eachLine(a.stdin, func(path string) error {
						if err := ctx.Err(); err != nil {
							return err
						}
						return p.add(ctx, path)
					})
					if err != nil {
						return err
					}
				}
				for _, src := range args {
					if recursive && src != "-" {
						it, ok, err := p.putTree(ctx, src, x)
						if err != nil {
							return err
						}
						if ok {
							if err := pinTop.tree(ctx, s, src, it.Ref); err != nil {
								return err
							}
						}
						if it.Skipped > 0 {
							a.warnf("", fmt.Errorf("%s: skipped %s (FIFO, socket or device: no content to store)", src, plural(it.Skipped, "special file")))
						}
						if !ok {
							continue
						}
						if a.jsonOut {
							res.Trees = append(res.Trees, it)
							continue
						}
						line := it.Ref.String() + "\n"
						if names {
							line = it.Ref.String() + " " + it.Source + "\n"
						}
						if _, err := io.WriteString(stdout, line); err != nil {
							return fail(exitIO, "stdout", err)
						}
						continue
					}
					if err := p.add(ctx, src); err != nil {
						return err
					}
				}
				return p.flush(ctx)
			}
			if pinName == "" {
				if err := putAll(ctx); err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(res)
				}
				return nil
			}
			// The artifacts, the trees and the pin in one step: nothing is
			// garbage in between, and nothing is printed before the pin is
			// durable (SPECS.md §16.3).
			var made *asl.Reference
			pins, err := putThenPin(ctx, s, pinForce, func(ctx context.Context) ([]asl.Pin, error) {
				if err := putAll(ctx); err != nil {
					return nil, err
				}
				ref, top, err := pinTop.target(ctx, s, id)
				if err != nil {
					return nil, err
				}
				if top {
					made = &ref
				}
				return []asl.Pin{{Name: pinName, Ref: ref}}, nil
			})
			if err != nil {
				return err
			}
			if made != nil && !a.jsonOut {
				fmt.Fprintln(&held, made)
			}
			if a.jsonOut {
				res.Pin = &pins[0]
				return a.printJSON(res)
			}
			if _, err := a.stdout.Write(held.Bytes()); err != nil {
				return fail(exitIO, "stdout", err)
			}
			return nil
		},
	}
	c.Flags().Var(&tag, "type-tag", "type tag for the artifacts: decimal or 0x hex (default: untagged)")
	c.Flags().StringVar(&hashName, "hash", "", "hash for the artifacts: sha256 or blake3 (default: the store's)")
	c.Flags().BoolVar(&names, "names", false, `print "REF NAME" lines`)
	c.Flags().BoolVarP(&recursive, "recursive", "r", false, "store each DIR as a snapshot: its files, symlinks and a tree; print the tree's reference last")
	c.Flags().StringArrayVar(&excludes, "exclude", nil, "with -r: leave out paths matching this gitignore pattern (repeatable)")
	c.Flags().StringArrayVar(&excludeFrom, "exclude-from", nil, "with -r: read gitignore patterns from FILE (repeatable)")
	c.Flags().BoolVar(&stdinList, "stdin-paths", false, "read the file names from standard input, one per line")
	c.Flags().StringVar(&pinName, "pin", "", "pin what is put as NAME in the same step: one FILE's artifact, one DIR's tree (-r), or a tree holding every FILE and DIR given")
	c.Flags().BoolVar(&pinForce, "force", false, "with --pin: re-point NAME when it names another reference (exit 1 without it)")
	return c
}
