package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/amduat/amduat/asl"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// chunkValue returns the key and value of chunk i of ref's blob.
func chunkValue(t *testing.T, s *Store, ref asl.Reference, i uint64) ([]byte, []byte) {
	t.Helper()
	rec := indexOf(t, s, ref)
	if !rec.chunked() {
		t.Fatalf("%s is not chunked", ref)
	}
	key := appendChunkKey(nil, rec.Blob, i)
	return key, rawGet(t, s, key)
}

// headLen is the length of the first CBOR item of v.
func headLen(t *testing.T, v []byte) int {
	t.Helper()
	var h chunkHeader
	rest, err := decMode.UnmarshalFirst(v, &h)
	if err != nil {
		t.Fatal(err)
	}
	return len(v) - len(rest)
}

func flip(v []byte, i int, bit byte) []byte {
	v = bytes.Clone(v)
	v[i] ^= bit
	return v
}

func TestCorruption(t *testing.T) {
	t.Parallel()
	const chunk = 64 << 10
	for _, mode := range []struct {
		name      string
		ingestMin int64
	}{{"batched", -1}, {"ingested", 2 * chunk}} {
		// The version 2 layout (PackMin < 0): chunks in Pebble, which
		// stores written before version 3 hold.
		t.Run(mode.name, func(t *testing.T) {
			testCorruption(t, &Options{ChunkSize: chunk, IngestMin: mode.ingestMin, PackMin: -1})
		})
	}
}

func testCorruption(t *testing.T, opts *Options) {
	chunk := opts.ChunkSize
	random := genBytes(100, 3*chunk+777, false)
	text := genBytes(101, 3*chunk+777, true)
	small := genBytes(102, 9000, true)
	single := genBytes(103, 40<<10, false)

	type damage func(t *testing.T, s *Store, ref asl.Reference)
	chunkDamage := func(i uint64, f func(t *testing.T, v []byte) []byte) damage {
		return func(t *testing.T, s *Store, ref asl.Reference) {
			key, v := chunkValue(t, s, ref, i)
			if f == nil {
				if err := s.db.Delete(key, nil); err != nil {
					t.Fatal(err)
				}
				return
			}
			rawSet(t, s, key, f(t, v))
		}
	}
	indexDamage := func(f func(t *testing.T, v []byte) []byte) damage {
		return func(t *testing.T, s *Store, ref asl.Reference) {
			key := appendIndexKey(nil, ref)
			rawSet(t, s, key, f(t, rawGet(t, s, key)))
		}
	}
	payloadByte := func(off int) func(t *testing.T, v []byte) []byte {
		return func(t *testing.T, v []byte) []byte { return flip(v, headLen(t, v)+off, 0x10) }
	}
	for _, c := range []struct {
		name   string
		data   []byte
		damage damage
	}{
		{"raw chunk byte, first chunk", random, chunkDamage(0, payloadByte(5))},
		{"raw chunk byte, middle chunk", random, chunkDamage(1, payloadByte(chunk/2))},
		{"raw chunk byte, last chunk", random, chunkDamage(3, payloadByte(10))},
		{"zstd chunk byte, first chunk", text, chunkDamage(0, payloadByte(20))},
		{"zstd chunk byte, middle chunk", text, chunkDamage(2, payloadByte(3))},
		{"zstd chunk last byte", text, chunkDamage(1, func(t *testing.T, v []byte) []byte { return flip(v, len(v)-1, 1) })},
		{"chunk header crc", random, chunkDamage(1, func(t *testing.T, v []byte) []byte { return flip(v, headLen(t, v)-1, 1) })},
		{"chunk header codec", random, chunkDamage(1, func(t *testing.T, v []byte) []byte { return flip(v, 2, 1) })},
		{"chunk header truncated", random, chunkDamage(2, func(t *testing.T, v []byte) []byte { return v[:3] })},
		{"chunk payload truncated", random, chunkDamage(1, func(t *testing.T, v []byte) []byte { return v[:len(v)-1] })},
		{"chunk swapped", random, func(t *testing.T, s *Store, ref asl.Reference) {
			_, v0 := chunkValue(t, s, ref, 0)
			k1, _ := chunkValue(t, s, ref, 1)
			rawSet(t, s, k1, v0)
		}},
		{"chunk deleted, first", random, chunkDamage(0, nil)},
		{"chunk deleted, middle", text, chunkDamage(2, nil)},
		{"chunk deleted, last", random, chunkDamage(3, nil)},
		{"single chunk byte", single, chunkDamage(0, payloadByte(100))},
		{"single chunk deleted", single, chunkDamage(0, nil)},
		{"inline payload byte", small, indexDamage(func(t *testing.T, v []byte) []byte { return flip(v, len(v)-3, 4) })},
		{"index record garbage", random, indexDamage(func(t *testing.T, v []byte) []byte { return []byte{0xff, 0x00} })},
		{"index record empty", small, indexDamage(func(t *testing.T, v []byte) []byte { return nil })},
		{"index record trailing byte", random, indexDamage(func(t *testing.T, v []byte) []byte { return append(v, 0) })},
		{"index record non-canonical", random, indexDamage(func(t *testing.T, v []byte) []byte {
			var rec indexRecord
			decMode.Unmarshal(v, &rec)
			// size as an 8-byte integer where 4 bytes suffice
			b := []byte{0xa0 + 5, 0x01, 0x1b, 0, 0, 0, 0}
			b = append(b, byte(rec.Size>>24), byte(rec.Size>>16), byte(rec.Size>>8), byte(rec.Size))
			enc := appendCBOR(nil, rec)
			return append(b, enc[1+1+5:]...)
		})},
		{"index tag forged", small, indexDamage(func(t *testing.T, v []byte) []byte {
			rec, ch, payload, err := decodeIndex(v)
			if err != nil {
				t.Fatal(err)
			}
			tag := uint32(9)
			rec.Tag = &tag
			return append(appendCBOR(appendCBOR(nil, rec), ch), payload...)
		})},
		{"index stored forged", text, indexDamage(func(t *testing.T, v []byte) []byte {
			rec, _, _ := decodeIndexHead(v)
			rec.Stored++
			return appendCBOR(nil, rec)
		})},
		{"index compression forged", text, indexDamage(func(t *testing.T, v []byte) []byte {
			rec, _, _ := decodeIndexHead(v)
			rec.Compression = (rec.Compression + 1) % 3
			return appendCBOR(nil, rec)
		})},
		{"index blob forged", random, indexDamage(func(t *testing.T, v []byte) []byte {
			rec, _, _ := decodeIndexHead(v)
			rec.Blob = 999
			return appendCBOR(nil, rec)
		})},
		{"last chunk forged with a valid crc", random, func(t *testing.T, s *Store, ref asl.Reference) {
			// Beyond what a CRC can see: the full digest still refuses it.
			forgeLastChunk(t, s, ref, 0)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newMemStore(t, opts)
			ref := put(t, s, asl.HashSHA256, asl.Tagged(2, c.data))
			c.damage(t, s, ref)
			readDamaged(t, s, ref, c.data)
		})
	}
}

// TestCorruptionEveryBit flips every bit of the stored values of small
// artifacts (inline and single chunk, raw and zstd) and of the index record
// of a chunked one: every read must fail with ErrIntegrity or return the
// original bytes, never other bytes.
func TestCorruptionEveryBit(t *testing.T) {
	t.Parallel()
	s := newMemStore(t, &Options{ChunkSize: MinChunkSize, InlineMax: 2048, MinCompressSize: 512, PackMin: -1})
	ctx := context.Background()
	cases := map[string][]byte{
		"inline raw":   genBytes(110, 300, false),
		"inline zstd":  genBytes(111, 1500, true),
		"chunk zstd":   genBytes(112, 3000, true),
		"chunked zstd": genBytes(113, 3*MinChunkSize+1, true),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			ref := put(t, s, asl.HashBLAKE3, asl.Untagged(data))
			rec := indexOf(t, s, ref)
			keys := [][]byte{appendIndexKey(nil, ref)}
			if rec.chunked() && rec.chunks() == 1 {
				keys = append(keys, appendChunkKey(nil, rec.Blob, 0))
			}
			for _, key := range keys {
				orig := rawGet(t, s, key)
				for i := range orig {
					for bit := range 8 {
						rawSet(t, s, key, flip(orig, i, 1<<bit))
						got, err := asl.Get(ctx, s, ref, 0)
						if err == nil {
							if !bytes.Equal(got.Bytes, data) {
								t.Fatalf("key %x byte %d bit %d: wrong bytes returned", key[:1], i, bit)
							}
							continue
						}
						readDamaged(t, s, ref, data)
					}
				}
				rawSet(t, s, key, orig)
			}
			if got := get(t, s, ref); !bytes.Equal(got.Bytes, data) {
				t.Fatal("restored artifact differs")
			}
		})
	}
}

func TestDamagedRecordsOnStatAndEnumerate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t, nil)
	ref := put(t, s, asl.HashSHA256, asl.Untagged([]byte("x")))
	rawSet(t, s, appendIndexKey(nil, ref), []byte{0x01})
	if _, err := s.Stat(ctx, ref); !isIntegrity(err) {
		t.Fatalf("Stat: %v", err)
	}
	if err := s.Enumerate(ctx, asl.Reference{}, func(asl.Info) error { return nil }); !isIntegrity(err) {
		t.Fatalf("Enumerate: %v", err)
	}
	rawSet(t, s, []byte{prefixIndex, 0, 0}, nil)
	if err := s.Enumerate(ctx, asl.Reference{}, func(asl.Info) error { return nil }); !isIntegrity(err) {
		t.Fatalf("Enumerate over a malformed key: %v", err)
	}
}

func TestDamagedConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		value []byte
		want  error
	}{
		{"garbage", []byte{0xff}, asl.ErrIntegrity},
		{"wrong format", encodeConfig(configRecord{Format: "other", Version: 1, Hash: 1}), asl.ErrIntegrity},
		{"future version", encodeConfig(configRecord{Format: formatName, Version: formatVersion + 1, Hash: 1}), asl.ErrUnsupported},
		{"unknown hash", encodeConfig(configRecord{Format: formatName, Version: 1, Hash: 0x7777}), asl.ErrUnsupported},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s := newMemStore(t, &Options{FS: fs})
			rawSet(t, s, configKey(), c.value)
			s.Close()
			_, err := Open("store", &Options{FS: fs})
			if !errors.Is(err, c.want) {
				t.Fatalf("Open: %v, want %v", err, c.want)
			}
		})
	}
}

// TestOpenUpgradesVersion1: a version 1 store opens, its artifacts read,
// and its config record is rewritten to the current version (so that a
// version 1 reader refuses a store that may hold pack records).
func TestOpenUpgradesVersion1(t *testing.T) {
	t.Parallel()
	fs := vfs.NewMem()
	s := newMemStore(t, &Options{FS: fs})
	data := []byte("written by version 1")
	ref := put(t, s, asl.HashSHA256, asl.Untagged(data))
	rawSet(t, s, configKey(), encodeConfig(configRecord{Format: formatName, Version: 1, Hash: 1}))
	s.Close()
	s, err := Open("store", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := get(t, s, ref); !bytes.Equal(got.Bytes, data) {
		t.Fatal("artifact differs after the upgrade")
	}
	cfg, err := decodeConfig(rawGet(t, s, configKey()))
	if err != nil || cfg.Version != formatVersion {
		t.Fatalf("config after Open: %+v, %v; want version %d", cfg, err, formatVersion)
	}
}

func isIntegrity(err error) bool { return errors.Is(err, asl.ErrIntegrity) }

// TestCorruptHook: Corrupt makes every read of an artifact fail with
// ErrIntegrity, whatever its record was (inline, packed, chunked), and
// reports a missing artifact.
func TestCorruptHook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t, &Options{ChunkSize: MinChunkSize, PackMin: 1})
	arts := []asl.Artifact{asl.Tagged(3, []byte("inline")), asl.Untagged(genBytes(120, 3*MinChunkSize, false))}
	refs, err := s.PutBatch(ctx, asl.HashSHA256, arts)
	if err != nil {
		t.Fatal(err)
	}
	refs = append(refs, put(t, s, asl.HashSHA256, asl.Untagged([]byte("inline, one fsync"))))
	for _, ref := range refs {
		if !s.Corrupt(ref, []byte("other bytes")) {
			t.Fatalf("Corrupt(%s) = false", ref)
		}
		if _, err := asl.Get(ctx, s, ref, 0); !isIntegrity(err) {
			t.Fatalf("Get after Corrupt: %v", err)
		}
	}
	if s.Corrupt(asl.MustDerive(asl.HashSHA256, asl.Untagged([]byte("absent"))), nil) {
		t.Fatal("Corrupt of an absent artifact reported true")
	}
}

// forgeLastChunk flips the low bit of byte at of the last chunk of ref (a
// raw chunk in Pebble) and gives the chunk a valid CRC: only the digest of
// the whole artifact can tell. It returns the chunk's index.
func forgeLastChunk(t *testing.T, s *Store, ref asl.Reference, at int) uint64 {
	t.Helper()
	rec := indexOf(t, s, ref)
	last := rec.chunks() - 1
	key, v := chunkValue(t, s, ref, last)
	payload := bytes.Clone(v[headLen(t, v):])
	payload[at] ^= 1
	ch := chunkHeader{Codec: codecRaw, Raw: uint64(len(payload)), CRC: chunkCRC(rec.Blob, last, codecRaw, uint64(len(payload)), payload)}
	rawSet(t, s, key, append(appendCBOR(nil, ch), payload...))
	return last
}

// TestDamagedSizeNearMax: an index record whose size was damaged to near
// 2^64 (so that ⌈size/chunk⌉ computed as (size+chunk-1)/chunk would wrap
// to no chunks at all) makes a read fail with ERR_INTEGRITY after a prefix
// of the stored bytes, rather than end at once with io.EOF and nothing
// verified. chunks() serves chunked and packed-parts records alike.
func TestDamagedSizeNearMax(t *testing.T) {
	t.Parallel()
	if got := (indexRecord{Size: 1<<64 - 1, Chunk: MinChunkSize}).chunks(); got != 1<<52 {
		t.Fatalf("chunks of 2^64-1 bytes in %d = %d, want 2^52", MinChunkSize, got)
	}
	data := genBytes(1, 3*MinChunkSize+100, false)
	for _, size := range []uint64{1<<64 - 1, 1<<64 - MinChunkSize + 1, 1<<64 - MinChunkSize} {
		t.Run(fmt.Sprintf("size=%#x", size), func(t *testing.T) {
			s := newMemStore(t, &Options{ChunkSize: MinChunkSize, InlineMax: -1})
			ref := put(t, s, asl.HashSHA256, asl.Untagged(data))
			rec := indexOf(t, s, ref)
			if !rec.packed() || rec.Chunk != MinChunkSize {
				t.Fatalf("record %+v: want packed parts", rec)
			}
			rec.Size = size
			rawSet(t, s, appendIndexKey(nil, ref), appendIndexRecord(nil, rec))
			readDamaged(t, s, ref, data)
		})
	}
}
