package workflow

import (
	"fmt"

	"github.com/goccy/go-yaml/ast"
)

// Bounds of a workflow file, checked before it is decoded: YAML aliases
// let a small file stand for an enormous document ("billion laughs": an
// anchor whose value refers nine times to the previous anchor, and so on),
// which decoding would build in memory.
const (
	// MaxFileSize is the largest workflow file loaded, in bytes (4 MiB).
	MaxFileSize = 4 << 20
	// MaxNodes is the most YAML nodes a workflow file may stand for once
	// every alias is expanded: far more than any workflow needs.
	MaxNodes = 100_000
)

// checkExpansion refuses a document that stands for more than MaxNodes
// nodes with its aliases expanded, naming the position of the alias (or
// node) where the count passes the bound. It walks the tree once: an
// alias counts the expanded size of its anchor, computed when the anchor
// was walked, so the check itself is linear in the file.
func checkExpansion(body ast.Node) *Problem {
	c := expansion{anchors: map[string]int{}}
	c.walk(body)
	return c.problem
}

type expansion struct {
	n       int
	anchors map[string]int // anchor name -> expanded size
	problem *Problem
}

func (c *expansion) add(k int, at ast.Node) {
	if c.problem != nil {
		return
	}
	c.n += k
	if c.n > MaxNodes {
		p := &Problem{Message: fmt.Sprintf("the document stands for more than %d YAML nodes once its aliases are expanded (an alias bomb?); write the values out, or use fewer aliases of large anchors", MaxNodes)}
		if tk := at.GetToken(); tk != nil && tk.Position != nil {
			p.Line, p.Col = tk.Position.Line, tk.Position.Column
		}
		c.problem = p
	}
}

func (c *expansion) walk(n ast.Node) {
	if n == nil || c.problem != nil {
		return
	}
	switch x := n.(type) {
	case *ast.MappingNode:
		c.add(1, x)
		for _, v := range x.Values {
			c.walk(v)
		}
	case *ast.MappingValueNode:
		c.walk(x.Key)
		c.walk(x.Value)
	case *ast.SequenceNode:
		c.add(1, x)
		for _, v := range x.Values {
			c.walk(v)
		}
	case *ast.AnchorNode:
		before := c.n
		c.walk(x.Value)
		if x.Name != nil {
			c.anchors[x.Name.String()] = c.n - before
		}
	case *ast.AliasNode:
		size := 1
		if x.Value != nil {
			if s, ok := c.anchors[x.Value.String()]; ok {
				size = max(s, 1)
			}
		}
		c.add(size, x)
	case *ast.TagNode:
		c.walk(x.Value)
	default:
		c.add(1, x)
	}
}
