// Package codeshape keeps the code's shape across the whole module: no
// production type does everything (at most 20 methods, or an adapter put
// together from parts that each are) and no production function runs
// over 80 lines. It has no code of its own: its tests read the module.
package codeshape
