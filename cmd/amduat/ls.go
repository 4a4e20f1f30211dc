package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/aslutil"
	"github.com/amduat/amduat/asl/pebblestore"
)

func init() {
	addCommand(newLsCmd)
	addCommand(newDuCmd)
}

// parseSize accepts a byte count: a decimal number, optionally followed by
// K, M, G or T (powers of 1024; "KiB", "MiB"… are accepted too).
func parseSize(s string) (uint64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(s, "iB"), "B")
	mult := uint64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || (mult > 1 && n > (1<<64-1)/mult) {
		return 0, fmt.Errorf("size %q: want a number of bytes, optionally with K, M, G or T (powers of 1024)", s)
	}
	return n * mult, nil
}

// filterFlags are the selection flags shared by ls and du.
type filterFlags struct {
	tag, minSize, maxSize string
}

func (f *filterFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&f.tag, "type-tag", "", "only artifacts with this type tag (decimal, 0x hex, or none for untagged)")
	c.Flags().StringVar(&f.minSize, "min-size", "", "only artifacts of at least this many bytes (K, M, G, T suffixes: powers of 1024)")
	c.Flags().StringVar(&f.maxSize, "max-size", "", "only artifacts of at most this many bytes")
}

func (f *filterFlags) filter() (aslutil.Filter, error) {
	var out aslutil.Filter
	switch f.tag {
	case "":
	case "none":
		out.Untagged = true
	default:
		t, err := parseTypeTag(f.tag)
		if err != nil {
			return out, usageErr(fmt.Errorf("--type-tag: %w (or none)", err))
		}
		out.HasTag, out.Tag = true, t
	}
	if f.minSize != "" {
		n, err := parseSize(f.minSize)
		if err != nil {
			return out, usageErr(fmt.Errorf("--min-size: %w", err))
		}
		out.MinSize = n
	}
	if f.maxSize != "" {
		n, err := parseSize(f.maxSize)
		if err != nil {
			return out, usageErr(fmt.Errorf("--max-size: %w", err))
		}
		out.MaxSize, out.HasMax = n, true
	}
	return out, nil
}

// statItemOf is the JSON object of one artifact, as stat --json prints it.
func statItemOf(in asl.Info) statItem {
	return statItem{Ref: in.Ref, Size: in.Size, TypeTag: tagPtr(in.Header), StoredSize: in.StoredSize, Compression: in.Compression}
}

func newLsCmd(a *app) *cobra.Command {
	var (
		ff               filterFlags
		quiet, recursive bool
	)
	c := &cobra.Command{
		Use:   "ls [--type-tag N|none] [--min-size N] [--max-size N] [-q] | ls TREE [-r] [-q]",
		Short: "List stored artifacts (streaming, in reference order)",
		Long: `List every stored artifact, in ascending reference order, one line each:

  REF size=N type_tag=0xHHHHHHHH|none stored_size=N compression=none|zstd|mixed

(the line of stat). -q prints only the references. The filters select by type
tag (a number, or none for untagged artifacts) and payload size (bytes, or
with a K, M, G or T suffix, powers of 1024). The listing streams: memory does
not grow with the store, and the first line appears at once.

With --json the output is JSON lines, not one document: one object per
artifact, {"ref","size","type_tag","stored_size","compression"} (the objects
of stat --json), so that a listing of millions of artifacts streams. An
error after the listing began is one last line {"error","code","command"}.

ls TREE lists a directory stored by put -r (TREE/1; TREE:path names a
sub-directory), in name order, one line per entry:

  KIND SIZE REF NAME

KIND is file, executable, directory or symlink; SIZE the file's length
(a symlink's: its target's; a directory's: its tree artifact's). -r lists
everything below, with paths relative to TREE; -q prints only the names.
Names that hold a control character, a quote, a backslash or bytes that are
not UTF-8 are printed Go-quoted. With --json: JSON lines
{"path","kind","executable","size","ref"}.`,
		Example: `  amduat ls
  amduat ls --type-tag 0x103 -q        # every surface result
  amduat ls --min-size 1M --json | jq -r .ref
  amduat ls -r "$tree"                   # a snapshot made by put -r
  amduat ls "$tree:src/lib"`,
		Args: rangeArgs(0, 1),
		RunE: func(c *cobra.Command, args []string) (err error) {
			if len(args) == 1 {
				if ff.set() {
					return usagef("--type-tag, --min-size and --max-size select stored artifacts; with TREE they do not apply")
				}
				return a.lsTree(c.Context(), args[0], recursive, quiet)
			}
			if recursive {
				return usagef("-r lists a TREE recursively; give the tree's reference")
			}
			f, err := ff.filter()
			if err != nil {
				return err
			}
			s, err := a.openStoreReadOnly()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			w := bufio.NewWriterSize(a.stdout, 64<<10)
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			var line []byte
			err = aslutil.List(c.Context(), s, f, func(in asl.Info) error {
				var werr error
				switch {
				case a.jsonOut:
					werr = enc.Encode(statItemOf(in))
				case quiet:
					line = append(hex.AppendEncode(line[:0], in.Ref.Bytes()), '\n')
					_, werr = w.Write(line)
				default:
					line = appendStatLine(line[:0], in)
					_, werr = w.Write(line)
				}
				if werr != nil {
					return fail(exitIO, "stdout", werr)
				}
				return nil
			})
			if ferr := w.Flush(); ferr != nil && err == nil {
				err = fail(exitIO, "stdout", ferr)
			}
			if err != nil {
				return failAuto(a.storeDir, err)
			}
			return nil
		},
	}
	ff.add(c)
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the references (with TREE: only the names)")
	c.Flags().BoolVarP(&recursive, "recursive", "r", false, "with TREE: list every entry below it, with its path")
	return c
}

type duRow struct {
	TypeTag       *uint32 `json:"type_tag"`
	Count         uint64  `json:"count"`
	Bytes         uint64  `json:"bytes"`
	StoredBytes   uint64  `json:"stored_bytes"`
	StoredUnknown uint64  `json:"stored_unknown"`
}

type duHash struct {
	Hash   string `json:"hash"`
	HashID uint16 `json:"hash_id"`
	Count  uint64 `json:"count"`
}

type duResult struct {
	Artifacts     uint64                 `json:"artifacts"`
	Bytes         uint64                 `json:"bytes"`
	StoredBytes   uint64                 `json:"stored_bytes"`
	StoredUnknown uint64                 `json:"stored_unknown"`
	ByTypeTag     []duRow                `json:"by_type_tag"`
	ByHash        []duHash               `json:"by_hash"`
	Packs         []pebblestore.PackStat `json:"packs"`
}

func duRowOf(u aslutil.TagUsage) duRow {
	r := duRow{Count: u.Count, Bytes: u.Bytes, StoredBytes: u.StoredBytes, StoredUnknown: u.UnknownStored}
	if u.HasTag {
		t := uint32(u.Tag)
		r.TypeTag = &t
	}
	return r
}

func tagName(t asl.TypeTag) string {
	switch t {
	case 0x100:
		return "scheme descriptor"
	case 0x101:
		return "program"
	case 0x102:
		return "trace"
	case 0x103:
		return "result"
	case 0x201:
		return "edge"
	}
	return ""
}

func newDuCmd(a *app) *cobra.Command {
	var ff filterFlags
	var human bool
	c := &cobra.Command{
		Use:     "du [-h] [--type-tag N|none] [--min-size N] [--max-size N]",
		Aliases: []string{"stats"},
		Short:   "Summarise the store: counts, logical and stored bytes by type tag",
		Long: `Read every artifact's index entry once (no payload bytes) and print, per type
tag (untagged first, then ascending), the number of artifacts, their payload
bytes (logical size) and the bytes the store keeps for them after compression
(stored), then the totals and the count per hash:

  TYPE_TAG    COUNT  BYTES  STORED  NAME
  none            3     15      15
  0x00000101      1     52      52  program
  total           4     67      67
  hash sha256 4
  packs 2 bytes 1048576 live 0.93
  pack 1 size 1044480 records 1021 live 0.95
  pack 2 size 4096 records 2 live 0.06

On the embedded store, one line per pack file follows the summary: its
size, the artifacts it holds and its live fraction (the stored bytes of the
artifacts the index names in it, plus 64 per record, over its size: the
figure gc compares with --compact-below). On a server or a bucket the packs
line says "packs: not reported". The filters apply to the artifact rows,
not to the packs. JSON: {"artifacts",
"bytes", "stored_bytes", "stored_unknown", "by_type_tag": [{"type_tag",
"count", "bytes", "stored_bytes", "stored_unknown"}], "by_hash": [{"hash",
"hash_id", "count"}], "packs": [{"id", "size", "records", "live_bytes"}] or
null}; stored_unknown counts artifacts whose
backend gave no stored size (not included in stored_bytes).`,
		Args: rangeArgs(0, 0),
		RunE: func(c *cobra.Command, _ []string) (err error) {
			f, err := ff.filter()
			if err != nil {
				return err
			}
			s, err := a.openStoreReadOnly()
			if err != nil {
				return err
			}
			defer closeStore(s, a.storeDir, &err)
			u, err := aslutil.Usage(c.Context(), s, f)
			if err != nil {
				return failAuto(a.storeDir, err)
			}
			res := duResult{Artifacts: u.Total.Count, Bytes: u.Total.Bytes, StoredBytes: u.Total.StoredBytes,
				StoredUnknown: u.Total.UnknownStored, ByTypeTag: []duRow{}, ByHash: []duHash{}}
			for _, r := range u.ByTag {
				res.ByTypeTag = append(res.ByTypeTag, duRowOf(r))
			}
			for _, h := range asl.Hashes() {
				if n := u.ByHash[h.ID]; n > 0 {
					res.ByHash = append(res.ByHash, duHash{h.Short, uint16(h.ID), n})
				}
			}
			var other uint64
			for id, n := range u.ByHash {
				if _, ok := asl.LookupHash(id); !ok {
					other += n
				}
			}
			if other > 0 {
				res.ByHash = append(res.ByHash, duHash{"unregistered", 0, other})
			}
			if ps, ok := s.(interface {
				PackStats(context.Context) ([]pebblestore.PackStat, error)
			}); ok {
				if res.Packs, err = ps.PackStats(c.Context()); err != nil {
					return failAuto(a.storeDir, err)
				}
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			bytesText := func(n uint64) string {
				if human {
					return humanSize(n)
				}
				return strconv.FormatUint(n, 10)
			}
			stored := func(u aslutil.TagUsage) string {
				if u.UnknownStored > 0 {
					return bytesText(u.StoredBytes) + "+?"
				}
				return bytesText(u.StoredBytes)
			}
			tw := newTable(a.stdout)
			tw.row("TYPE_TAG", "COUNT", "BYTES", "STORED", "NAME")
			for _, r := range u.ByTag {
				name := ""
				if r.HasTag {
					name = tagName(r.Tag)
				}
				tw.row(asl.Header{HasTag: r.HasTag, Tag: r.Tag}.TagString(), strconv.FormatUint(r.Count, 10),
					bytesText(r.Bytes), stored(r), name)
			}
			tw.row("total", strconv.FormatUint(u.Total.Count, 10), bytesText(u.Total.Bytes), stored(u.Total), "")
			tw.flush()
			for _, h := range res.ByHash {
				fmt.Fprintf(a.stdout, "hash %s %d\n", h.Hash, h.Count)
			}
			if res.Packs == nil {
				fmt.Fprintln(a.stdout, "packs: not reported")
				return nil
			}
			var size, live int64
			for _, p := range res.Packs {
				size += p.Size
				live += p.LiveBytes
			}
			fmt.Fprintf(a.stdout, "packs %d bytes %s live %s\n", len(res.Packs), bytesText(uint64(size)), liveFraction(live, size))
			for _, p := range res.Packs {
				fmt.Fprintf(a.stdout, "pack %d size %s records %d live %s\n", p.ID, bytesText(uint64(p.Size)), p.Records, liveFraction(p.LiveBytes, p.Size))
			}
			return nil
		},
	}
	ff.add(c)
	c.Flags().BoolVarP(&human, "human-readable", "h", false, "print sizes as du -h does (1023, 1.0K, 4.5M, 12G: powers of 1024)")
	c.Flags().Bool("help", false, "help for du (-h is --human-readable here, as in du)")
	return c
}

// humanSize writes n as du -h does: bytes below 1024, else one decimal
// below 10 units and none from 10 up, rounded up, in K, M, G, T, P, E
// (powers of 1024).
func humanSize(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10)
	}
	v := float64(n)
	for _, u := range "KMGTPE" {
		v /= 1024
		if v < 10 {
			if r := math.Ceil(v*10) / 10; r < 10 {
				return strconv.FormatFloat(r, 'f', 1, 64) + string(u)
			}
			return "10" + string(u)
		}
		if v < 1024 {
			if r := math.Ceil(v); r < 1024 {
				return strconv.FormatFloat(r, 'f', 0, 64) + string(u)
			}
		}
	}
	return strconv.FormatFloat(math.Ceil(v), 'f', 0, 64) + "E"
}

// table aligns columns: the first left-aligned, the others right-aligned,
// the last (a name) left-aligned.
type table struct {
	w    interface{ Write([]byte) (int, error) }
	rows [][]string
}

func newTable(w interface{ Write([]byte) (int, error) }) *table { return &table{w: w} }

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) flush() {
	if len(t.rows) == 0 {
		return
	}
	width := make([]int, len(t.rows[0]))
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	for _, r := range t.rows {
		var b strings.Builder
		for i, c := range r {
			switch {
			case i == 0:
				fmt.Fprintf(&b, "%-*s", width[i], c)
			case i == len(r)-1:
				if c != "" {
					b.WriteString("  " + c)
				}
			default:
				fmt.Fprintf(&b, "  %*s", width[i], c)
			}
		}
		fmt.Fprintln(t.w, b.String())
	}
}

// appendStatLine appends statLine(in) and a newline, without fmt: ls
// prints millions of them.
func appendStatLine(dst []byte, in asl.Info) []byte {
	dst = hex.AppendEncode(dst, in.Ref.Bytes())
	dst = append(dst, " size="...)
	dst = strconv.AppendUint(dst, in.Size, 10)
	dst = append(dst, " type_tag="...)
	if in.HasTag {
		dst = append(dst, "0x"...)
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(in.Tag))
		dst = hex.AppendEncode(dst, b[:])
	} else {
		dst = append(dst, "none"...)
	}
	dst = append(dst, " stored_size="...)
	dst = strconv.AppendInt(dst, in.StoredSize, 10)
	dst = append(dst, " compression="...)
	dst = append(dst, in.Compression...)
	return append(dst, '\n')
}

// liveFraction renders live/size with two decimals, capped at 1 (the
// per-record overhead is an estimate).
func liveFraction(live, size int64) string {
	if size <= 0 {
		return "0.00"
	}
	return strconv.FormatFloat(min(1, float64(live)/float64(size)), 'f', 2, 64)
}
