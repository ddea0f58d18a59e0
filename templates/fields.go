package templates

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
)

// checkFields walks a template's parse tree and follows every field
// reference through the type of the data it is rendered with: {{.Acton}}
// is found even in a branch no sample takes. Where a type cannot be known
// statically (an interface, what a builtin returns, a map keyed otherwise
// than by string) the walk stops following it; rendering the samples is
// the second net.
func checkFields(t *template.Template, data reflect.Type) []string {
	if t.Tree == nil {
		return nil
	}
	c := &fieldChecker{t: t, funcs: funcs()}
	c.list(t.Tree.Root, data, map[string]reflect.Type{"$": data})
	return c.errs
}

type fieldChecker struct {
	t     *template.Template
	funcs template.FuncMap
	errs  []string
}

func (c *fieldChecker) errorf(n parse.Node, format string, args ...any) {
	loc, ctx := c.t.ErrorContext(n)
	// loc is "name:line:col"; the caller names the file.
	parts := strings.Split(loc, ":")
	where := loc
	if len(parts) >= 3 {
		where = "line " + parts[len(parts)-2] + ", column " + parts[len(parts)-1]
	}
	c.errs = append(c.errs, fmt.Sprintf("%s, at {{%s}}: %s", where, ctx, fmt.Sprintf(format, args...)))
}

func (c *fieldChecker) list(l *parse.ListNode, dot reflect.Type, vars map[string]reflect.Type) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		c.node(n, dot, vars)
	}
}

func (c *fieldChecker) node(n parse.Node, dot reflect.Type, vars map[string]reflect.Type) {
	switch n := n.(type) {
	case *parse.ActionNode:
		// A declaration in an action lasts to the end of its list.
		c.pipe(n.Pipe, dot, vars, vars)
	case *parse.IfNode:
		inner := maps.Clone(vars)
		c.pipe(n.Pipe, dot, vars, inner)
		c.list(n.List, dot, inner)
		c.list(n.ElseList, dot, maps.Clone(vars))
	case *parse.WithNode:
		inner := maps.Clone(vars)
		c.list(n.List, c.pipe(n.Pipe, dot, vars, inner), inner)
		c.list(n.ElseList, dot, maps.Clone(vars))
	case *parse.RangeNode:
		inner := maps.Clone(vars)
		key, elem := iteration(c.pipe(n.Pipe, dot, vars, nil))
		switch decl := n.Pipe.Decl; len(decl) {
		case 1:
			inner[decl[0].Ident[0]] = elem
		case 2:
			inner[decl[0].Ident[0]], inner[decl[1].Ident[0]] = key, elem
		}
		c.list(n.List, elem, inner)
		c.list(n.ElseList, dot, maps.Clone(vars))
	case *parse.ListNode:
		c.list(n, dot, vars)
	}
}

// pipe checks a pipeline and returns its type (nil when unknown). Variables
// it declares go into decl (nil: not recorded, as for range, which
// declares its own).
func (c *fieldChecker) pipe(p *parse.PipeNode, dot reflect.Type, vars, decl map[string]reflect.Type) reflect.Type {
	if p == nil {
		return nil
	}
	var typ reflect.Type
	for _, cmd := range p.Cmds {
		typ = c.command(cmd, dot, vars)
	}
	if decl != nil {
		for _, v := range p.Decl {
			decl[v.Ident[0]] = typ
		}
	}
	return typ
}

func (c *fieldChecker) command(cmd *parse.CommandNode, dot reflect.Type, vars map[string]reflect.Type) reflect.Type {
	if len(cmd.Args) == 0 {
		return nil
	}
	for _, arg := range cmd.Args[1:] {
		c.arg(arg, dot, vars)
	}
	if id, ok := cmd.Args[0].(*parse.IdentifierNode); ok {
		if fn, ok := c.funcs[id.Ident]; ok {
			if ft := reflect.TypeOf(fn); ft.NumOut() > 0 {
				return ft.Out(0)
			}
		}
		return nil // a builtin: its result type depends on its arguments
	}
	return c.arg(cmd.Args[0], dot, vars)
}

func (c *fieldChecker) arg(n parse.Node, dot reflect.Type, vars map[string]reflect.Type) reflect.Type {
	switch n := n.(type) {
	case *parse.DotNode:
		return dot
	case *parse.FieldNode:
		return c.fields(n, dot, n.Ident)
	case *parse.VariableNode:
		return c.fields(n, vars[n.Ident[0]], n.Ident[1:])
	case *parse.ChainNode:
		var base reflect.Type
		if p, ok := n.Node.(*parse.PipeNode); ok {
			base = c.pipe(p, dot, vars, nil)
		} else {
			base = c.arg(n.Node, dot, vars)
		}
		return c.fields(n, base, n.Field)
	case *parse.PipeNode:
		return c.pipe(n, dot, vars, nil)
	case *parse.StringNode:
		return reflect.TypeFor[string]()
	case *parse.BoolNode:
		return reflect.TypeFor[bool]()
	}
	return nil
}

// fields follows .A.B.C from typ, as text/template would: a method of
// that name first, else a struct field, else a string-keyed map's value.
func (c *fieldChecker) fields(n parse.Node, typ reflect.Type, idents []string) reflect.Type {
	for _, name := range idents {
		if typ == nil || typ.Kind() == reflect.Interface {
			return nil
		}
		if m, ok := method(typ, name); ok {
			if m.Type.NumOut() == 0 {
				return nil
			}
			typ = m.Type.Out(0)
			continue
		}
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		switch typ.Kind() {
		case reflect.Struct:
			f, ok := typ.FieldByName(name)
			if !ok || !f.IsExported() {
				c.errorf(n, "can't evaluate field %s in type %s", name, typ)
				return nil
			}
			typ = f.Type
		case reflect.Map:
			if typ.Key().Kind() != reflect.String {
				return nil
			}
			typ = typ.Elem()
		case reflect.Interface:
			return nil
		default:
			c.errorf(n, "can't evaluate field %s in type %s", name, typ)
			return nil
		}
	}
	return typ
}

// method finds an exported method on typ or, as text/template calls
// pointer methods of addressable values, on *typ.
func method(typ reflect.Type, name string) (reflect.Method, bool) {
	if m, ok := typ.MethodByName(name); ok {
		return m, true
	}
	if typ.Kind() != reflect.Pointer {
		return reflect.PointerTo(typ).MethodByName(name)
	}
	return reflect.Method{}, false
}

// iteration is what range over typ yields: key and element types.
func iteration(typ reflect.Type) (key, elem reflect.Type) {
	for typ != nil && typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == nil {
		return nil, nil
	}
	switch typ.Kind() {
	case reflect.Slice, reflect.Array:
		return reflect.TypeFor[int](), typ.Elem()
	case reflect.Map:
		return typ.Key(), typ.Elem()
	case reflect.Int, reflect.Int64:
		return typ, typ
	}
	return nil, nil
}
