// tlogcheck: an independent reader of a C2SP tlog-tiles log, built from Go's x/mod (Debian's
// golang-golang-x-mod-dev, GOPATH mode) by tests/integration/test_objstore_go.py.
//
// Usage: tlogcheck BASE_URL VERIFIER_KEY
//
// It fetches BASE_URL/checkpoint, opens it with x/mod's note package and the log's verifier
// key, then lets tlog.TileHashReader (whose TileReader maps x/mod's tile paths, which carry
// the height, tile/8/L/N, to C2SP's tile/L/N) read and verify every hash tile it needs: the
// tree hash at the signed size, a record proof of every entry (the leaf hashed from the entry
// bundles), and tree proofs from a few older sizes. It prints "ok SIZE" or fails with exit 1.
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const height = 8

func get(url string) ([]byte, error) {
	resp, err := http.Get(url) // Go decodes Content-Encoding: gzip (entry bundles) itself
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<24))
}

// c2sp maps an x/mod tile path (tile/H/L/N[.p/W]) to the C2SP one (tile/L/N[.p/W]).
func c2sp(t tlog.Tile) string {
	p := t.Path()
	prefix := fmt.Sprintf("tile/%d/", height)
	if !strings.HasPrefix(p, prefix) {
		panic("unexpected tile path " + p)
	}
	return "tile/" + strings.TrimPrefix(p, prefix)
}

type reader struct{ base string }

func (r reader) Height() int { return height }

func (r reader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := get(r.base + c2sp(t))
		if err != nil && t.W < 1<<height { // a partial tile may be gone once full
			full := t
			full.W = 1 << height
			if data, err = get(r.base + c2sp(full)); err == nil {
				data = data[:t.W*tlog.HashSize]
			}
		}
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (r reader) SaveTiles(tiles []tlog.Tile, data [][]byte) {}

func entries(base string, index int64, width int) ([][]byte, error) {
	t := tlog.Tile{H: height, L: 0, N: index, W: width}
	data, err := get(base + "tile/entries/" + strings.TrimPrefix(c2sp(t), "tile/0/"))
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for len(data) > 0 {
		if len(data) < 2 {
			return nil, fmt.Errorf("bundle %d: truncated", index)
		}
		n := int(binary.BigEndian.Uint16(data))
		if len(data) < 2+n {
			return nil, fmt.Errorf("bundle %d: truncated entry", index)
		}
		out = append(out, data[2:2+n])
		data = data[2+n:]
	}
	if len(out) < width {
		return nil, fmt.Errorf("bundle %d: %d entries, want %d", index, len(out), width)
	}
	return out, nil
}

func run(base, vkey string) error {
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	msg, err := get(base + "checkpoint")
	if err != nil {
		return err
	}
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		return err
	}
	n, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		return fmt.Errorf("checkpoint: %v", err)
	}
	lines := bufio.NewScanner(strings.NewReader(n.Text))
	var body []string
	for lines.Scan() {
		body = append(body, lines.Text())
	}
	if len(body) < 3 || body[0] != verifier.Name() {
		return fmt.Errorf("checkpoint body %q", n.Text)
	}
	size, err := strconv.ParseInt(body[1], 10, 64)
	if err != nil || size < 1 {
		return fmt.Errorf("checkpoint size %q", body[1])
	}
	raw, err := base64.StdEncoding.DecodeString(body[2])
	if err != nil || len(raw) != tlog.HashSize {
		return fmt.Errorf("checkpoint root %q", body[2])
	}
	var root tlog.Hash
	copy(root[:], raw)
	hr := tlog.TileHashReader(tlog.Tree{N: size, Hash: root}, reader{base})
	got, err := tlog.TreeHash(size, hr)
	if err != nil {
		return fmt.Errorf("tree hash: %v", err)
	}
	if got != root {
		return fmt.Errorf("tree hash %v, checkpoint %v", got, root)
	}
	for b := int64(0); b*(1<<height) < size; b++ {
		width := int(size - b*(1<<height))
		if width > 1<<height {
			width = 1 << height
		}
		leaves, err := entries(base, b, width)
		if err != nil {
			return err
		}
		for i := 0; i < width; i++ {
			index := b*(1<<height) + int64(i)
			proof, err := tlog.ProveRecord(size, index, hr)
			if err != nil {
				return fmt.Errorf("prove record %d: %v", index, err)
			}
			if err := tlog.CheckRecord(proof, size, root, index, tlog.RecordHash(leaves[i])); err != nil {
				return fmt.Errorf("record %d: %v", index, err)
			}
		}
	}
	for _, old := range []int64{1, size / 3, size / 2, size - 1} {
		if old < 1 || old >= size {
			continue
		}
		oldHash, err := tlog.TreeHash(old, hr)
		if err != nil {
			return fmt.Errorf("tree hash %d: %v", old, err)
		}
		proof, err := tlog.ProveTree(size, old, hr)
		if err != nil {
			return fmt.Errorf("prove tree %d: %v", old, err)
		}
		if err := tlog.CheckTree(proof, size, root, old, oldHash); err != nil {
			return fmt.Errorf("tree %d -> %d: %v", old, size, err)
		}
	}
	fmt.Printf("ok %d\n", size)
	return nil
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: tlogcheck BASE_URL VERIFIER_KEY")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "tlogcheck:", err)
		os.Exit(1)
	}
}
