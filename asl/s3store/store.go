// Package s3store is an asl.Store over an S3-compatible object store
// (SPECS.md §6.7): artifacts are objects holding their ArtifactBytes under
// keys derived from their reference, index entries (§6.5) are small objects,
// and every byte read is re-hashed on the client (§6.2), so a damaged or
// truncated object is asl.ErrIntegrity, never wrong bytes. Any number of
// processes may open one bucket and prefix at once: puts are content
// addressed and idempotent (§6.1).
package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/amduat/amduat/asl"
)

// Format and Version are the config object's (SPECS.md §6.7).
const (
	Format  = "amduat-s3store"
	Version = 4
)

// Defaults.
const (
	// DefaultPartSize is the part size of large artifacts: a large put
	// holds at most largeParallel+1 parts in memory (a get none).
	DefaultPartSize = 16 << 20
	// DefaultParallel bounds the requests one batch, listing or scan has
	// in flight.
	DefaultParallel = 16
	// fetchWholeMax is the largest artifact Fetch verifies before it
	// returns a reader; larger ones stream, verified at the end.
	fetchWholeMax = 256 << 10
	// DefaultCacheSize bounds Options.CacheDir when CacheSize is 0.
	DefaultCacheSize = 1 << 30
	// maxIndexValue bounds one index value read into memory.
	maxIndexValue = 64 << 20
)

var (
	// ErrNoStore: the bucket or its config object is missing (run
	// `amduat init --store s3://…`).
	ErrNoStore = errors.New("no store here")
	// ErrExists: Create found a config object of another store.
	ErrExists = errors.New("a different store already exists here")
	// ErrClosed: the store was used after Close.
	ErrClosed = errors.New("s3store: store closed")
)

// Options configure Open and Create. Zero fields take the defaults.
type Options struct {
	// Endpoint is host[:port] of the S3 API; default s3.amazonaws.com.
	Endpoint string
	// Region of the bucket; default us-east-1.
	Region string
	// Insecure talks plain HTTP instead of HTTPS.
	Insecure bool
	// PathStyle forces path-style requests (http://host/bucket/key);
	// otherwise the client picks (virtual-host style on AWS).
	PathStyle bool
	// AccessKey and SecretKey, when set, are used instead of the standard
	// chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, MINIO_ROOT_USER…,
	// ~/.aws/credentials, ~/.mc/config.json, instance metadata).
	AccessKey, SecretKey string
	// Hash is the default hash Create records; default SHA-256.
	Hash asl.HashID
	// PartSize is the size of the parts of large artifacts (SPECS.md
	// §6.7), at least 5 MiB; artifacts up to it are put with one PUT from
	// memory.
	PartSize uint64
	// Parallel bounds requests in flight per call.
	Parallel int
	// MaxRetries of one request (the client library retries network
	// errors, 5xx and throttling with exponential backoff); default 10.
	// The transient answers of SPECS.md §6.7, "Retries" (a server still
	// starting, SlowDown, InternalError…) are retried for up to a minute
	// besides, whatever MaxRetries says, so a small MaxRetries bounds only
	// the retries of a server that cannot be reached.
	MaxRetries int
	// Transport, when set, carries the requests (tests inject faults).
	Transport http.RoundTripper
	// CacheDir, when set, keeps verified copies of the artifacts fetched
	// in this directory, at most CacheSize bytes (default 1 GiB), least
	// recently used out first (SPECS.md §6.7, "Local cache"). One process
	// per directory.
	CacheDir  string
	CacheSize int64
	// MemCacheSize, when above 0, keeps the payloads of small artifacts
	// (up to 256 KiB) this store put or read, verified, in memory, at
	// most MemCacheSize bytes, and answers Fetch from them without a
	// request (SPECS.md §6.7, "Requests per operation"); `amduat serve`
	// uses DefaultMemCacheSize. Off by default.
	MemCacheSize int64
	// TouchAge: a put of an artifact already stored whose object is older
	// rewrites it, so that its grace starts again (default
	// DefaultTouchAge; negative: always). GC refuses a grace shorter
	// than its own store's TouchAge (SPECS.md §6.7).
	TouchAge time.Duration
	// Lease of a running collection (default DefaultLease).
	Lease time.Duration
	// ReachWait is how long a request is sent again while the object
	// store refuses connections (a server restarting; SPECS.md §6.7,
	// "Retries"): zero DefaultReachWait, negative not at all. WaitLog,
	// when set, gets one line per such outage saying what the requests
	// wait for.
	ReachWait time.Duration
	WaitLog   io.Writer
}

// DefaultReachWait bounds the wait for an object store that refuses
// connections.
const DefaultReachWait = time.Minute

// Store is an asl.Store, asl.Indexer, asl.IndexSeeker and
// asl.BatchFetcher over one bucket
// and key prefix.
type Store struct {
	core   *minio.Core
	bucket string
	prefix string // "" or ends in "/"
	hash   asl.HashID
	opts   Options
	cache  *diskCache // nil without Options.CacheDir

	children ChildrenFunc // SetChildren
	reqs     *reqCounter  // Stats
	mem      *memCache    // nil without Options.MemCacheSize
	packs    *packSet     // the packs this process has learned (packset.go)
	looseIx  looseIndex   // whether the bucket holds loose index entries (index.go)

	mu     sync.RWMutex
	closed bool
}

var (
	_ asl.Store        = (*Store)(nil)
	_ asl.Indexer      = (*Store)(nil)
	_ asl.IndexSeeker  = (*Store)(nil)
	_ asl.BatchFetcher = (*Store)(nil)
)

// ParseURL splits s3://BUCKET[/PREFIX][?endpoint=HOST:PORT&region=R&insecure=1&path-style=1]
// into bucket, prefix and Options (the endpoint may also be written
// http://HOST:PORT, which implies insecure, or https://HOST:PORT); the environment variables
// AMDUAT_S3_ENDPOINT, AMDUAT_S3_REGION, AMDUAT_S3_INSECURE and
// AMDUAT_S3_PATH_STYLE give what the URL leaves out (SPECS.md §6.7).
func ParseURL(s string) (bucket, prefix string, o Options, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", o, fmt.Errorf("store %q: %w", s, err)
	}
	if u.Scheme != "s3" || u.Host == "" {
		return "", "", o, fmt.Errorf("store %q: want s3://BUCKET[/PREFIX][?endpoint=HOST:PORT&region=R&insecure=1&path-style=1]", s)
	}
	bucket = u.Host
	prefix = strings.Trim(u.Path, "/")
	q := u.Query()
	get := func(param, env string) string {
		if v := q.Get(param); v != "" {
			return v
		}
		return os.Getenv(env)
	}
	flag := func(param, env string) (bool, error) {
		v := get(param, env)
		if v == "" {
			return false, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("store %q: %s=%q is not a boolean", s, param, v)
		}
		return b, nil
	}
	o.Endpoint = get("endpoint", "AMDUAT_S3_ENDPOINT")
	o.Region = get("region", "AMDUAT_S3_REGION")
	if o.Insecure, err = flag("insecure", "AMDUAT_S3_INSECURE"); err != nil {
		return "", "", o, err
	}
	if o.PathStyle, err = flag("path-style", "AMDUAT_S3_PATH_STYLE"); err != nil {
		return "", "", o, err
	}
	// An endpoint written as a URL, the form MinIO and most clients print:
	// http:// implies insecure, https:// secure; an explicit insecure that
	// says otherwise is refused.
	if scheme, rest, ok := strings.Cut(o.Endpoint, "://"); ok {
		explicit := get("insecure", "AMDUAT_S3_INSECURE") != ""
		switch scheme {
		case "http", "https":
		default:
			return "", "", o, fmt.Errorf("store %q: endpoint %q: scheme %q (want http://, https:// or HOST:PORT)", s, o.Endpoint, scheme)
		}
		if host, path, _ := strings.Cut(rest, "/"); host == "" || path != "" {
			return "", "", o, fmt.Errorf("store %q: endpoint %q: want HOST[:PORT] after the scheme, no path", s, o.Endpoint)
		}
		insecure := scheme == "http"
		if explicit && o.Insecure != insecure {
			return "", "", o, fmt.Errorf("store %q: endpoint %q says %s but insecure=%t", s, o.Endpoint, scheme, o.Insecure)
		}
		o.Endpoint, o.Insecure = strings.TrimSuffix(rest, "/"), insecure
	}
	for k := range q {
		switch k {
		case "endpoint", "region", "insecure", "path-style":
		default:
			return "", "", o, fmt.Errorf("store %q: unknown parameter %q (known: endpoint, region, insecure, path-style)", s, k)
		}
	}
	return bucket, prefix, o, nil
}

func newStore(bucket, prefix string, o Options) (*Store, error) {
	if o.Endpoint == "" {
		o.Endpoint = "s3.amazonaws.com"
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.PartSize < 5<<20 {
		return nil, fmt.Errorf("s3store: part size %d is below the S3 minimum of 5 MiB", o.PartSize)
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	var creds *credentials.Credentials
	if o.AccessKey != "" {
		creds = credentials.NewStaticV4(o.AccessKey, o.SecretKey, "")
	} else {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.EnvMinio{},
			&credentials.FileAWSCredentials{},
			&credentials.FileMinioClient{},
			&credentials.IAM{},
		})
	}
	lookup := minio.BucketLookupAuto
	if o.PathStyle {
		lookup = minio.BucketLookupPath
	}
	// Transient answers are retried below the client library, whatever
	// MaxRetries says (retry.go; SPECS.md §6.7, "Retries").
	next := o.Transport
	if next == nil {
		tr, err := minio.DefaultTransport(!o.Insecure)
		if err != nil {
			return nil, fmt.Errorf("s3store: endpoint %s: %w", o.Endpoint, err)
		}
		next = tr
	}
	reqs := &reqCounter{next: next}
	mo := &minio.Options{
		Creds:        creds,
		Secure:       !o.Insecure,
		Region:       o.Region,
		BucketLookup: lookup,
		Transport:    &retryTransport{next: reqs, reachWait: durationOption(o.ReachWait, DefaultReachWait), waitLog: o.WaitLog},
	}
	if o.MaxRetries > 0 {
		mo.MaxRetries = o.MaxRetries
	}
	core, err := minio.NewCore(o.Endpoint, mo)
	if err != nil {
		return nil, fmt.Errorf("s3store: endpoint %s: %w", o.Endpoint, err)
	}
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		prefix += "/"
	}
	s := &Store{core: core, bucket: bucket, prefix: prefix, opts: o, reqs: reqs, packs: newPackSet()}
	if o.MemCacheSize > 0 {
		s.mem = newMemCache(o.MemCacheSize)
	}
	if o.CacheDir != "" {
		if o.CacheSize <= 0 {
			o.CacheSize = DefaultCacheSize
		}
		if s.cache, err = openCache(o.CacheDir, o.CacheSize); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// durationOption reads a duration option as Options and GCOptions spell
// them: zero is def, negative is none (0).
func durationOption(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// config is the config object (SPECS.md §6.7).
type config struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Hash    uint16 `json:"hash"`
}

// Create makes the bucket when it is missing and writes the config object
// with the default hash o.Hash (SPECS.md §6.7). A config object already
// there is accepted when it records the same hash, else ErrExists.
func Create(ctx context.Context, bucket, prefix string, o Options) (*Store, error) {
	if o.Hash == 0 {
		o.Hash = asl.HashSHA256
	}
	if _, ok := asl.LookupHash(o.Hash); !ok {
		return nil, fmt.Errorf("s3store: hash 0x%04x: %w", uint16(o.Hash), asl.ErrUnsupported)
	}
	s, err := newStore(bucket, prefix, o)
	if err != nil {
		return nil, err
	}
	ok, err := s.core.BucketExists(ctx, bucket)
	if err != nil {
		return nil, s.errorf("check bucket", "", asl.Reference{}, err)
	}
	if !ok {
		err := s.core.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: s.opts.Region})
		if err != nil && code(err) != "BucketAlreadyOwnedByYou" {
			return nil, s.errorf("create bucket", "", asl.Reference{}, err)
		}
	}
	body, _ := json.Marshal(config{Format: Format, Version: Version, Hash: uint16(o.Hash)})
	key := s.prefix + "config"
	po := minio.PutObjectOptions{ContentType: "application/json"}
	withChecksum(&po, body, "")
	po.SetMatchETagExcept("*")
	_, err = s.core.Client.PutObject(ctx, bucket, key, bytes.NewReader(body), int64(len(body)), po)
	if err != nil && !alreadyExists(err) {
		return nil, s.errorf("write config", key, asl.Reference{}, err)
	}
	if err := s.readConfig(ctx); err != nil {
		return nil, err
	}
	if s.hash != o.Hash {
		return nil, fmt.Errorf("s3store: s3://%s/%s records hash %s, not %s: %w", bucket, key, s.hash, o.Hash, ErrExists)
	}
	return s, nil
}

// Open opens the store at bucket/prefix, reading its config object; a
// missing bucket or config is ErrNoStore.
func Open(ctx context.Context, bucket, prefix string, o Options) (*Store, error) {
	s, err := newStore(bucket, prefix, o)
	if err != nil {
		return nil, err
	}
	if err := s.readConfig(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// OpenURL opens (create false) or creates the store an s3:// URL names.
func OpenURL(ctx context.Context, u string, create bool, o Options) (*Store, error) {
	bucket, prefix, uo, err := ParseURL(u)
	if err != nil {
		return nil, err
	}
	uo.AccessKey, uo.SecretKey, uo.Hash = o.AccessKey, o.SecretKey, o.Hash
	uo.PartSize, uo.Parallel, uo.MaxRetries, uo.Transport = o.PartSize, o.Parallel, o.MaxRetries, o.Transport
	uo.CacheDir, uo.CacheSize = o.CacheDir, o.CacheSize
	uo.MemCacheSize = o.MemCacheSize
	uo.TouchAge, uo.Lease = o.TouchAge, o.Lease
	uo.ReachWait, uo.WaitLog = o.ReachWait, o.WaitLog
	if create {
		return Create(ctx, bucket, prefix, uo)
	}
	return Open(ctx, bucket, prefix, uo)
}

// atEOF reports whether nothing but white space follows d's last value.
func atEOF(d *json.Decoder) bool {
	_, err := d.Token()
	return err == io.EOF
}

func (s *Store) readConfig(ctx context.Context) error {
	key := s.prefix + "config"
	rc, info, _, err := s.core.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		switch code(err) {
		case "NoSuchKey", "NoSuchBucket":
			return fmt.Errorf("s3store: s3://%s/%s: %w", s.bucket, key, ErrNoStore)
		}
		return s.errorf("read config", key, asl.Reference{}, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 4096))
	if err != nil {
		return s.errorf("read config", key, asl.Reference{}, err)
	}
	var c config
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil || c.Format != Format || !atEOF(d) {
		return fmt.Errorf("s3store: s3://%s/%s is no %s config object: %w", s.bucket, key, Format, asl.ErrIntegrity)
	}
	if c.Version < 1 || c.Version > Version {
		return fmt.Errorf("s3store: s3://%s/%s: layout version %d: %w", s.bucket, key, c.Version, asl.ErrUnsupported)
	}
	if _, ok := asl.LookupHash(asl.HashID(c.Hash)); !ok {
		return fmt.Errorf("s3store: s3://%s/%s: hash 0x%04x: %w", s.bucket, key, c.Hash, asl.ErrUnsupported)
	}
	s.hash = asl.HashID(c.Hash)
	if c.Version < Version {
		return s.upgrade(ctx, key, info.ETag)
	}
	return nil
}

// upgrade rewrites a version 1 or 2 config object as the current version
// (SPECS.md §6.7, "Versions"), conditionally on the ETag read, so that a
// process of an older release refuses the bucket rather than read the
// manifests or compressed objects this one writes as damaged artifacts,
// or write beside a collection without its protocol. Everything an older
// version wrote reads unchanged.
func (s *Store) upgrade(ctx context.Context, key, etag string) error {
	body, _ := json.Marshal(config{Format: Format, Version: Version, Hash: uint16(s.hash)})
	po := minio.PutObjectOptions{ContentType: "application/json"}
	withChecksum(&po, body, "")
	po.SetMatchETag(etag)
	_, err := s.core.Client.PutObject(ctx, s.bucket, key, bytes.NewReader(body), int64(len(body)), po)
	if err != nil && !alreadyExists(err) { // 412: another process upgraded it first
		return s.errorf("upgrade config to the current layout version", key, asl.Reference{}, err)
	}
	return nil
}

// DefaultHash is the hash recorded at Create.
func (s *Store) DefaultHash() asl.HashID { return s.hash }

// Bucket and Prefix name where the store lives.
func (s *Store) Bucket() string { return s.bucket }

// Prefix is the key prefix ("" or ending in "/").
func (s *Store) Prefix() string { return s.prefix }

// Client is the underlying minio-go client (tests and bench use it).
func (s *Store) Client() *minio.Client { return s.core.Client }

// Close ends the use of the store; the bucket keeps everything
// acknowledged.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func (s *Store) check() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// ArtifactKey is the object key of ref (SPECS.md §6.7):
// PREFIX a/HHHH/DD/REFHEX, with HHHH the hash id and DD the digest's first
// byte. Every part is a prefix of the reference's hex, so keys sort as
// ReferenceBytes do.
func (s *Store) ArtifactKey(ref asl.Reference) string {
	h := ref.String()
	if len(h) < 6 {
		return s.prefix + "a/" + h + "/"
	}
	return s.prefix + "a/" + h[:4] + "/" + h[4:6] + "/" + h
}

// IndexKey is the object key of an index entry (SPECS.md §6.7):
// PREFIX i/SPACE/xHEXKEY, the space escaped so that it holds no '/'.
func (s *Store) IndexKey(space string, key []byte) string {
	return s.indexPrefix(space) + hex.EncodeToString(key)
}

func (s *Store) indexPrefix(space string) string {
	return s.prefix + "i/" + escapeSpace(space) + "/x"
}

// escapeSpace keeps A-Z a-z 0-9 . _ - and writes any other byte as %XX.
// parseIndexKey is IndexKey's inverse: the space and key of a loose index
// entry's object key; ok is false for any other key.
func (s *Store) parseIndexKey(okey string) (space string, key []byte, ok bool) {
	rest, found := strings.CutPrefix(okey, s.prefix+"i/")
	if !found {
		return "", nil, false
	}
	i := strings.LastIndex(rest, "/x")
	if i <= 0 {
		return "", nil, false
	}
	sp, err := url.PathUnescape(rest[:i])
	if err != nil || escapeSpace(sp) != rest[:i] {
		return "", nil, false
	}
	k, err := hex.DecodeString(rest[i+2:])
	if err != nil || hex.EncodeToString(k) != rest[i+2:] {
		return "", nil, false
	}
	return sp, k, true
}

func escapeSpace(space string) string {
	var b strings.Builder
	for i := 0; i < len(space); i++ {
		c := space[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func (s *Store) tmpKey() string {
	var r [16]byte
	rand.Read(r[:])
	return s.prefix + "tmp/" + time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(r[:])
}

// code is the S3 error code of err ("" when it is none).
func code(err error) string {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		return er.Code
	}
	return minio.ToErrorResponse(err).Code
}

// alreadyExists: a conditional create (If-None-Match: *) found the key.
func alreadyExists(err error) bool {
	c := code(err)
	return c == "PreconditionFailed"
}

// errorf names the operation, the object (s3://bucket/key) and the
// reference, and keeps the class of err (SPECS.md §6.3): NoSuchKey is
// asl.ErrNotFound; everything else the library reports (network, 5xx
// after its retries, throttling, access) is an I/O error.
func (s *Store) errorf(op, key string, ref asl.Reference, err error) error {
	where := "s3://" + s.bucket + "/" + key
	if !ref.IsZero() {
		where += " (" + ref.String() + ")"
	}
	switch c := code(err); {
	case c == "NoSuchKey":
		return fmt.Errorf("s3store: %s %s: %w", op, where, asl.ErrNotFound)
	case c == damagedCode:
		return fmt.Errorf("s3store: %s %s: the object store found its copy of the object damaged (%s): %w", op, where, minio.ToErrorResponse(err).Message, asl.ErrIntegrity)
	case unreadableCode(c):
		return fmt.Errorf("s3store: %s %s: the object store cannot read the object's data (%s: its copy is damaged, bitrot): %w: %w", op, where, c, err, asl.ErrIntegrity)
	case c == "InternalError" && damagedMessage(minio.ToErrorResponse(err).Message):
		return fmt.Errorf("s3store: %s %s: the object store found its copy of the object damaged: %w: %w", op, where, err, asl.ErrIntegrity)
	}
	return fmt.Errorf("s3store: %s %s: %w", op, where, err)
}

// unreadableCode reports whether an S3 error code says the object store
// found the object's own data damaged (SPECS.md §6.7, "Damage"): MinIO
// answers a read of an object whose data files fail its bitrot checks
// with SlowDownRead (503, "Resource requested is unreadable": too few
// intact shards, which on one drive means a damaged one; retry.go
// retries it for unreadableFor and then rewrites it to damagedCode) or
// XMinioObjectTampered.
func unreadableCode(c string) bool {
	switch c {
	case "SlowDownRead", "XMinioObjectTampered", "XMinioErasureReadQuorum":
		return true
	}
	return false
}

// damagedMessage reports whether the message of an InternalError says the
// object store found its own stored copy damaged rather than failing for a
// while (SPECS.md §6.7, "Damage"): MinIO answers a read of an object whose
// metadata file (xl.meta) fails its checksum, or no longer decodes, with
// InternalError and a cause naming the mismatch or the decoder's failure
// ("msgp: …"). Such an answer is neither retried nor an I/O error.
func damagedMessage(msg string) bool {
	for _, s := range []string{"CRC mismatch", "file is corrupted", "bitrot", "Bitrot", "msgp: "} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// checkRef refuses the zero reference (malformed: ErrIntegrity) and an
// unregistered hash id (ErrUnsupported), before any request.
func checkRef(ref asl.Reference) error {
	if ref.IsZero() {
		return fmt.Errorf("reference is zero: %w", asl.ErrIntegrity)
	}
	if !ref.Known() {
		return fmt.Errorf("%s: hash id 0x%04x is not registered: %w", ref, uint16(ref.HashID()), asl.ErrUnsupported)
	}
	return nil
}

func checkHash(id asl.HashID) error {
	if _, ok := asl.LookupHash(id); !ok {
		return fmt.Errorf("s3store: put: hash id 0x%04x is not registered: %w", uint16(id), asl.ErrUnsupported)
	}
	return nil
}
