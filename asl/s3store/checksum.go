package s3store

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"

	"github.com/minio/minio-go/v7"
)

// castagnoli is the CRC-32C table of the checksums objects are put with.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// withChecksum adds to po the checksum an object PUT carries (SPECS.md
// §6.7, "Checksums"), computed by the client from the bytes b it sends:
// x-amz-checksum-sha256, base64 of the object's SHA-256, when the caller
// knows it without hashing (sha256Hex: the digest of a SHA-256 Reference
// for its uncompressed object, the SHA-256 a compressed object or a part
// was hashed to); otherwise x-amz-checksum-crc32c, base64 of the big-endian
// CRC-32C of b. The object store computes the same checksum over the body
// it received and refuses the PUT when they differ, so bytes damaged on the
// way are never stored; it keeps the checksum with the object (a HEAD with
// x-amz-checksum-mode: ENABLED returns it).
func withChecksum(po *minio.PutObjectOptions, b []byte, sha256Hex string) {
	if po.UserMetadata == nil {
		po.UserMetadata = map[string]string{}
	}
	if sum, err := hex.DecodeString(sha256Hex); err == nil && len(sum) == 32 {
		po.UserMetadata["X-Amz-Checksum-Sha256"] = base64.StdEncoding.EncodeToString(sum)
		return
	}
	var c [4]byte
	binary.BigEndian.PutUint32(c[:], crc32.Checksum(b, castagnoli))
	po.UserMetadata["X-Amz-Checksum-Crc32c"] = base64.StdEncoding.EncodeToString(c[:])
}
