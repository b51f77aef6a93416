// YAML aliases: a small document can name one large node many times (or
// nest aliases of aliases), and a decoder expands every alias it meets.
// The size of the expanded document is measured on the node graph, each
// anchored node once, before anything decodes it.

package workflow

import (
	"bytes"
	"errors"
	"fmt"

	yaml3 "go.yaml.in/yaml/v3"
)

// MaxExpandedDocumentBytes bounds a YAML document once its aliases are
// expanded (as JSON text, about).
const MaxExpandedDocumentBytes = 4 << 20

// ErrDocumentTooLarge is matched by the error of a YAML document whose
// aliases expand it past its bound.
var ErrDocumentTooLarge = errors.New("the YAML document is too large")

// CheckYAMLExpansion refuses a YAML document whose aliases would expand it
// to more than max bytes, without expanding it: each anchored node is
// measured once and its size reused at every alias. A document without
// aliases is not parsed at all. A document that does not parse is left to
// the decoder that reads it next, which says why in its own words.
func CheckYAMLExpansion(data []byte, max int64) error {
	if !bytes.ContainsRune(data, '*') {
		return nil // an alias is written *name
	}
	var root yaml3.Node
	if err := yaml3.Unmarshal(data, &root); err != nil {
		return nil
	}
	m := expansion{max: max, sizes: map[*yaml3.Node]int64{}, open: map[*yaml3.Node]bool{}}
	size, err := m.size(&root)
	if errors.Is(err, errAliasCycle) {
		return nil // the decoder refuses it, and says where
	}
	if size > max {
		return fmt.Errorf("%w: more than %d bytes once its aliases are expanded", ErrDocumentTooLarge, max)
	}
	return nil
}

// errAliasCycle: an alias inside the node it names.
var errAliasCycle = errors.New("an alias inside the node it names")

// expansion measures nodes as JSON text: scalars with quotes, mappings and
// sequences with their punctuation. A sum stops growing past max.
type expansion struct {
	max   int64
	sizes map[*yaml3.Node]int64 // anchored nodes measured
	open  map[*yaml3.Node]bool  // anchored nodes being measured
}

func (m *expansion) size(n *yaml3.Node) (int64, error) {
	if n == nil {
		return 4, nil
	}
	if n.Kind == yaml3.AliasNode {
		return m.size(n.Alias)
	}
	if n.Anchor != "" {
		if s, ok := m.sizes[n]; ok {
			return s, nil
		}
		if m.open[n] {
			return 0, errAliasCycle
		}
		m.open[n] = true
		defer delete(m.open, n)
	}
	var total int64
	switch n.Kind {
	case yaml3.ScalarNode:
		total = int64(len(n.Value)) + 2
	default:
		total = 2 + int64(max(len(n.Content)-1, 0))
		for _, c := range n.Content {
			s, err := m.size(c)
			if err != nil {
				return 0, err
			}
			if total += s; total > m.max {
				total = m.max + 1
				break
			}
		}
	}
	if n.Anchor != "" {
		m.sizes[n] = total
	}
	return total, nil
}
