package surf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/pel"
)

// LogIndexSpace is the index space of the run log (SPECS.md §19.7): one
// entry per surface run, keyed time_ns (u64 BE) ‖ request key (32 bytes) ‖
// result ReferenceBytes, valued by a deterministic CBOR LogRecord.
const LogIndexSpace = "surf.log"

// LogRecord is one run of the log. Seq is not stored: it is the record's
// 1-based position in key order, assigned when the log is read.
type LogRecord struct {
	Seq        uint64
	Time       time.Time
	RequestKey [32]byte
	ResultRef  asl.Reference
	ProgramRef asl.Reference
	Status     pel.ExecutionStatus
	StatusCode uint32
	Cache      string // "hit", "miss" or "off"
	Duration   time.Duration
}

// logValue is the CBOR form of a record (SPECS.md §19.7).
type logValue struct {
	V     uint64 `cbor:"v"`
	T     uint64 `cbor:"t"`
	RK    []byte `cbor:"rk"`
	Res   []byte `cbor:"res"`
	Prog  []byte `cbor:"prog"`
	St    uint64 `cbor:"st"`
	SC    uint64 `cbor:"sc"`
	Cache string `cbor:"cache"`
	Dur   uint64 `cbor:"dur"`
}

var (
	logEnc cbor.EncMode
	logDec cbor.DecMode
)

func init() {
	var err error
	if logEnc, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(err)
	}
	if logDec, err = (cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		MaxArrayElements:  16,
		MaxMapPairs:       16,
		IndefLength:       cbor.IndefLengthForbidden,
	}).DecMode(); err != nil {
		panic(err)
	}
}

// ErrBadLogRecord is wrapped by the error of a log entry that does not
// decode.
var ErrBadLogRecord = errors.New("malformed run log record")

// LogEntry returns the index entry recording rec.
func LogEntry(rec LogRecord) (asl.IndexEntry, error) {
	ns := rec.Time.UnixNano()
	if ns < 0 {
		return asl.IndexEntry{}, fmt.Errorf("run log: time %v is before 1970", rec.Time)
	}
	key := binary.BigEndian.AppendUint64(nil, uint64(ns))
	key = append(key, rec.RequestKey[:]...)
	key = rec.ResultRef.AppendBytes(key)
	v, err := logEnc.Marshal(logValue{V: 1, T: uint64(ns), RK: rec.RequestKey[:], Res: rec.ResultRef.Bytes(),
		Prog: rec.ProgramRef.Bytes(), St: uint64(rec.Status), SC: uint64(rec.StatusCode), Cache: rec.Cache, Dur: uint64(rec.Duration)})
	if err != nil {
		return asl.IndexEntry{}, fmt.Errorf("run log: %w", err)
	}
	return asl.IndexEntry{Space: LogIndexSpace, Key: key, Value: v}, nil
}

// DecodeLogRecord decodes one log entry strictly: the value must be the
// canonical CBOR of a version 1 record whose time, request key and result
// agree with the key. Seq is left zero.
func DecodeLogRecord(key, value []byte) (LogRecord, error) {
	var v logValue
	if err := logDec.Unmarshal(value, &v); err != nil {
		return LogRecord{}, fmt.Errorf("%w: %v", ErrBadLogRecord, err)
	}
	if re, err := logEnc.Marshal(v); err != nil || !bytes.Equal(re, value) {
		return LogRecord{}, fmt.Errorf("%w: not in canonical form", ErrBadLogRecord)
	}
	if v.V != 1 {
		return LogRecord{}, fmt.Errorf("%w: version %d", ErrBadLogRecord, v.V)
	}
	if len(v.RK) != 32 || v.T > 1<<63-1 || v.Dur > 1<<63-1 || v.St > 0xff || v.SC > 0xffffffff {
		return LogRecord{}, fmt.Errorf("%w: field out of range", ErrBadLogRecord)
	}
	res, err := asl.DecodeReference(v.Res)
	if err != nil {
		return LogRecord{}, fmt.Errorf("%w: result: %v", ErrBadLogRecord, err)
	}
	prog, err := asl.DecodeReference(v.Prog)
	if err != nil {
		return LogRecord{}, fmt.Errorf("%w: program: %v", ErrBadLogRecord, err)
	}
	switch v.Cache {
	case "hit", "miss", "off":
	default:
		return LogRecord{}, fmt.Errorf("%w: cache %q", ErrBadLogRecord, v.Cache)
	}
	want := binary.BigEndian.AppendUint64(nil, v.T)
	want = append(want, v.RK...)
	want = res.AppendBytes(want)
	if !bytes.Equal(key, want) {
		return LogRecord{}, fmt.Errorf("%w: key does not match the record", ErrBadLogRecord)
	}
	rec := LogRecord{Time: time.Unix(0, int64(v.T)).UTC(), ResultRef: res, ProgramRef: prog,
		Status: pel.ExecutionStatus(v.St), StatusCode: uint32(v.SC), Cache: v.Cache, Duration: time.Duration(v.Dur)}
	copy(rec.RequestKey[:], v.RK)
	return rec, nil
}

// LogFilter selects records for ReadLog.
type LogFilter struct {
	Since     uint64 // only records with Seq > Since
	HasStatus bool
	Status    pel.ExecutionStatus
}

// ReadLog visits the log in order, numbering records from 1; a malformed
// entry is skipped and given to bad (if non-nil) with its would-be number,
// so numbers stay stable. It scans the whole space: O(records).
func ReadLog(ctx context.Context, ix asl.Indexer, f LogFilter, fn func(LogRecord) error, bad func(seq uint64, key []byte, err error)) (last LogPos, err error) {
	var seq uint64
	err = ix.ScanIndex(ctx, LogIndexSpace, nil, func(key, value []byte) error {
		seq++
		last = LogPos{Seq: seq, Key: append([]byte(nil), key...)}
		if seq <= f.Since {
			return nil
		}
		rec, err := DecodeLogRecord(key, value)
		if err != nil {
			if bad != nil {
				bad(seq, key, err)
			}
			return nil
		}
		rec.Seq = seq
		if f.HasStatus && rec.Status != f.Status {
			return nil
		}
		return fn(rec)
	})
	return last, err
}

// LogPos is where a reader of the log stopped: the last record's number
// and key.
type LogPos struct {
	Seq uint64
	Key []byte
}

// ReadLogAfter visits the records whose key is above pos.Key, numbering
// them from pos.Seq+1. It scans only the key ranges that share pos's and
// now's top 4 time bytes (about 4.3 s each), so following a long log costs
// what the new records cost, not the whole log.
func ReadLogAfter(ctx context.Context, ix asl.Indexer, pos LogPos, now time.Time, f LogFilter, fn func(LogRecord) error) (LogPos, error) {
	if len(pos.Key) < 8 {
		return ReadLog(ctx, ix, LogFilter{Since: pos.Seq, HasStatus: f.HasStatus, Status: f.Status}, fn, nil)
	}
	from := binary.BigEndian.Uint32(pos.Key[:4])
	to := uint32(uint64(now.UnixNano()) >> 32)
	if to < from {
		to = from
	}
	if to-from > 1<<10 {
		// A follower that slept for over an hour rescans the whole log.
		var last LogPos
		var err error
		last, err = ReadLog(ctx, ix, LogFilter{Since: pos.Seq, HasStatus: f.HasStatus, Status: f.Status}, fn, nil)
		if last.Seq < pos.Seq {
			last = pos
		}
		return last, err
	}
	for hi := uint64(from); hi <= uint64(to); hi++ {
		prefix := binary.BigEndian.AppendUint32(nil, uint32(hi))
		err := ix.ScanIndex(ctx, LogIndexSpace, prefix, func(key, value []byte) error {
			if bytes.Compare(key, pos.Key) <= 0 {
				return nil
			}
			pos.Seq++
			pos.Key = append(pos.Key[:0], key...)
			rec, err := DecodeLogRecord(key, value)
			if err != nil {
				return nil
			}
			rec.Seq = pos.Seq
			if f.HasStatus && rec.Status != f.Status {
				return nil
			}
			return fn(rec)
		})
		if err != nil {
			return pos, err
		}
	}
	return pos, nil
}

// StaleLogKeys calls fn with the key of every log record whose result is
// no longer stored (SPECS.md §19.7: garbage collection deletes those
// records when it deletes their results). It reads the whole log and stats
// each result once; deleting the keys is the caller's (the index has no
// delete operation in asl.Indexer yet).
func StaleLogKeys(ctx context.Context, ix asl.Indexer, st asl.Statter, fn func(key []byte, rec LogRecord) error) error {
	return ix.ScanIndex(ctx, LogIndexSpace, nil, func(key, value []byte) error {
		rec, err := DecodeLogRecord(key, value)
		if err != nil {
			return nil // a malformed record is not this function's to judge
		}
		ok, err := asl.Has(ctx, st, rec.ResultRef)
		if err != nil {
			return fmt.Errorf("run log: result %s: %w", rec.ResultRef, err)
		}
		if !ok {
			return fn(append([]byte(nil), key...), rec)
		}
		return nil
	})
}
