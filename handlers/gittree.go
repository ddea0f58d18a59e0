package handlers

import (
	"encoding/hex"
	"sort"
	"strings"

	"github.com/sandbox-bot/sandbox-bot/dispatch"
	"github.com/sandbox-bot/sandbox-bot/handlers/hub"
)

// artifactTreeSHA is the id git (and GitHub) gives the tree of files, each
// a regular file (100644) at its slash-separated path: computed here, it
// lets the bot see that a branch already holds exactly these files without
// writing anything.
func artifactTreeSHA(files []dispatch.Artifact) string {
	root := &treeNode{children: map[string]*treeNode{}}
	for _, f := range files {
		n := root
		parts := strings.Split(f.Path, "/")
		for _, dir := range parts[:len(parts)-1] {
			c := n.children[dir]
			if c == nil {
				c = &treeNode{children: map[string]*treeNode{}}
				n.children[dir] = c
			}
			n = c
		}
		n.children[parts[len(parts)-1]] = &treeNode{blob: hub.GitObjectID("blob", f.Data)}
	}
	return hex.EncodeToString(root.id())
}

// treeNode is a directory (children) or a file (blob, its raw object id).
type treeNode struct {
	blob     []byte
	children map[string]*treeNode
}

// id writes the tree object: entries "<mode> <name>\0<raw id>", sorted the
// way git sorts them (a directory's name as if it ended in "/").
func (n *treeNode) id() []byte {
	type entry struct {
		key, name, mode string
		id              []byte
	}
	var entries []entry
	for name, c := range n.children {
		if c.children != nil {
			entries = append(entries, entry{key: name + "/", name: name, mode: "40000", id: c.id()})
		} else {
			entries = append(entries, entry{key: name, name: name, mode: "100644", id: c.blob})
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].key < entries[j].key })
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.mode + " " + e.name + "\x00")
		b.Write(e.id)
	}
	return hub.GitObjectID("tree", []byte(b.String()))
}
