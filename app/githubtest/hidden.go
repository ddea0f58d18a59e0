package githubtest

// HiddenConstruct is Markdown whose part GitHub does not show: Hidden is a
// word only that part holds, Shown a word a reader sees.
type HiddenConstruct struct{ Name, Markdown, Hidden, Shown string }

// HiddenConstructs are the Markdown GitHub's rendering hides that a
// line-by-line reading lets through (issue 40), for tests of what reaches
// an agent of a report: each hidden word must stay out, each shown word
// must reach it.
var HiddenConstructs = []HiddenConstruct{
	{"comment after an escaped backtick", "Escaped \\` then <!-- alphahide --> alphashow and ` tail.", "alphahide", "alphashow"},
	{"html block with a fence and a comment", "<div>\nbravoshow\n```\n<!-- bravohide -->\n```\n</div>", "bravohide", "bravoshow"},
	{"words after a fence's language", "```go charliehide\ncharlieshow := 1\n```", "charliehide", "charlieshow"},
	{"multi-line reference definition", "deltashow\n\n[//]: # (\ndeltahide\n)", "deltahide", "deltashow"},
	{"definition with its target on the next line", "echoshow\n\n[foo]:\n/echohide", "echohide", "echoshow"},
	{"processing instruction", "foxshow\n\n<? foxhide ?>", "foxhide", "foxshow"},
	{"declaration", "golfshow\n\n<!X golfhide>", "golfhide", "golfshow"},
	{"cdata", "hotelshow\n\n<![CDATA[ hotelhide ]]>", "hotelhide", "hotelshow"},
	{"unreferenced footnote with continuation lines", "indiashow\n\n[^unused]: indiahide\n    indiamore", "indiamore", "indiashow"},
	{"backticks in an attribute", "x <span title=\"`\">julietshow</span> <!-- juliethide --> and ` tail", "juliethide", "julietshow"},
	{"image alt text", "![kilohide](https://example.com/k.png) kiloshow", "kilohide", "kiloshow"},
	{"invisible characters as entities", "lima&#xE0041;&#xE0042;show", "\U000E0041", "limashow"},
}
