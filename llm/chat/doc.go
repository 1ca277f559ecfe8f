// Package chat renders Hugging Face chat templates: the Jinja templates of
// tokenizer_config.json (or chat_template.jinja) that turn a conversation
// into a model's prompt, byte for byte as transformers' apply_chat_template
// renders them with Python's Jinja2 in Hugging Face's environment
// (ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and
// loopcontrols; tojson as json.dumps with ensure_ascii=False, key order
// kept and Python's float repr; raise_exception; strftime_now).
//
// It is its own small Jinja interpreter, with Python's semantics for what
// chat templates use. Implemented:
//
//   - Statements: if/elif/else, for (with else, an "if" filter, unpacking
//     and loop.index/index0/revindex/revindex0/first/last/length/
//     previtem/nextitem/cycle), break/continue, set (also of a
//     namespace's attribute, and the block form), macro (with defaults),
//     and Hugging Face's generation block; comments; whitespace control
//     ({%- -%} {{- -}} {#- -#}, "+"), trim_blocks, lstrip_blocks and the
//     dropped trailing newline.
//   - Expressions: literals (str with Python escapes, int, float, list,
//     tuple, dict, true/false/none), attribute and item access (a dict's
//     key, a list's or str's index), slices with steps (messages[::-1]),
//     calls with keyword arguments, filters, tests (is / is not),
//     arithmetic (+ - * / // % **), ~, comparisons (chained), in / not in,
//     and / or / not, and the inline if-else.
//   - Values as Python's: dicts in insertion order, ints apart from floats,
//     None printed as "None", Python's str and repr of every value,
//     Jinja's Undefined (empty when printed or iterated, an error when used
//     otherwise), and Python's error messages for wrong types
//     ("can only concatenate str (not \"dict\") to str", "argument of type
//     'NoneType' is not iterable", "'list object' has no attribute
//     'startswith'", ...).
//   - Methods: str's startswith, endswith, strip, lstrip, rstrip, split,
//     rsplit, splitlines, lower, upper, title, capitalize, replace, find,
//     rfind, count, join, isdigit, isalpha, isalnum, isspace, islower,
//     isupper; dict's keys, values, items, get, copy; list's index, count.
//     Methods that would change a list or dict are refused as the immutable
//     sandbox refuses them (SecurityError), any other attribute is
//     Undefined.
//   - Filters: abs, attr, capitalize, count, default (d), first, float,
//     indent, int, items, join, last, length, list, lower, map, max, min,
//     reject, rejectattr, replace, reverse, round, safe, select,
//     selectattr, sort, string, sum, title, tojson (Hugging Face's:
//     ensure_ascii, indent, separators, sort_keys), trim, unique, upper.
//   - Tests: defined, undefined, none, boolean, true, false, integer,
//     float, number, string, mapping, iterable, sequence, callable,
//     sameas, lower, upper, odd, even, divisibleby, in, eq/ne/lt/le/gt/ge
//     (and their symbols and aliases), escaped.
//   - Globals: raise_exception, strftime_now, namespace, range (at most
//     100,000 items, as the sandbox), dict.
//
// Not implemented (a template using them fails to parse, or fails when it
// gets there): include/import/extends/block, call blocks, filter blocks,
// raw, recursive loops, *args/**kwargs, printf-style "%" formatting,
// str.format, \N{...} escapes, and filters and tests not listed. Unknown
// filters and tests fail when used, as inside Jinja's conditional blocks.
// Known departures from Python, none met by chat templates in practice:
// integer arithmetic beyond int64 turns to float (integers of the input
// JSON of any size print exactly); range() and dict.keys() print as lists;
// Markup (|safe) does not escape what is added to it; a macro recursing
// past Limits.MaxDepth gives a LimitError where Python gives RecursionError.
//
// A rendering is bounded (Limits): output size, work steps and macro
// depth, so that a hostile template errors (ErrLimit) instead of hanging or
// running out of memory; parsing bounds how deeply a template nests.
//
// Checked against the 46 golden renderings of testdata/chat (Python Jinja2
// 3.1.2 in Hugging Face's environment, transformers' continue_final_message
// included), all rendered byte for byte with the same errors, and against
// about 200 snippets and whole templates rendered with Python's Jinja2
// 3.1.6 in the same environment (testdata/python_cases.json, made by
// testdata/gen_python_cases.py).
//
// Why not a library: measured against the same 46 goldens,
// github.com/ardanlabs/jinja v1.8.0 (newer versions need a newer Go)
// renders 40 byte for byte: its tojson writes 2.0 as 2, its trim is Go's
// whitespace rather than Python's, it prints None as "", and where Python
// raises a TypeError (None in a str test, str + dict) it renders on or
// words the error its own way. github.com/nikolalohinski/gonja/v2 v2.9.1
// renders 27: its tojson sorts keys, writes compact separators and escapes
// <>&, it cannot parse Gemma 3's template, and it shares the Python
// differences above.
package chat
