// Command wordcount is an example operation for amduat.wasm.run (export
// "wordcount", 1 output), written with package guest and built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o wordcount.wasm .
//
// (go run ./wasmop/examples/rebuild builds the checked-in wordcount.wasm).
//
// Data input 0 is the text; its words are the maximal runs of bytes that
// are not ASCII whitespace. Data input 1, optional, names the output
// encoding: "decimal" (the default: the count in decimal followed by a
// newline), "u64le" or "u64be" (8 bytes). Failure code 3: an unknown
// encoding; code 4: more than 2 data inputs.
//
// Built for another platform the command does nothing.
package main

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// encode renders count in the encoding named by format.
func encode(count uint64, format string) ([]byte, error) {
	switch format {
	case "", "decimal":
		return append(strconv.AppendUint(nil, count, 10), '\n'), nil
	case "u64le":
		return binary.LittleEndian.AppendUint64(nil, count), nil
	case "u64be":
		return binary.BigEndian.AppendUint64(nil, count), nil
	}
	return nil, fmt.Errorf("unknown encoding %q (want decimal, u64le or u64be)", format)
}

func main() {}
