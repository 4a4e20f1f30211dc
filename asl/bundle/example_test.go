package bundle_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/amduat/amduat/asl"
	"github.com/amduat/amduat/asl/bundle"
	"github.com/amduat/amduat/asl/memstore"
)

// Move two artifacts from one store to another through a bundle.
func Example() {
	ctx := context.Background()
	src, dst := memstore.New(), memstore.New()
	refs, _ := src.PutBatch(ctx, asl.HashSHA256, []asl.Artifact{asl.Untagged([]byte("hello")), asl.Tagged(0x101, []byte("hi"))})

	var buf bytes.Buffer
	st, err := bundle.Export(ctx, src, &buf, refs, refs[:1], nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("exported %d artifacts, %d bytes of bundle\n", st.Entries, buf.Len())

	in, err := bundle.Import(ctx, dst, &buf, bundle.ImportOptions{})
	if err != nil {
		panic(err)
	}
	ok, _ := asl.Has(ctx, dst, refs[1])
	fmt.Printf("imported %d, root %s, second present: %v\n", in.Stored, in.Roots[0], ok)
	// Output:
	// exported 2 artifacts, 202 bytes of bundle
	// imported 2, root 00011f1d4ea728bc4c10bbc8211c7644aa950b6296c9b3e70d263e4ae6fc83e895e4, second present: true
}
