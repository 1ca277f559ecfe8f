#!/usr/bin/env python3
"""Renders the snippets below with Python's Jinja2 in Hugging Face's chat
template environment and writes python_cases.json, which
TestPythonCases compares with this package's renderings.

Run from this folder: python3 gen_python_cases.py
(written with Jinja2 3.1.6, Python 3.11; strftime_now reads a fixed clock,
2024-07-26 09:05:03, as the Go test sets it.)
"""
import json
from datetime import datetime

import jinja2
from jinja2.exceptions import TemplateError, TemplateSyntaxError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime(2024, 7, 26, 9, 5, 3)


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)

MSGS = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello!", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": 2.0}}}]},
    {"role": "tool", "content": "{\"ok\": true}"},
    {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image"}]},
]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather <now> & 'then' — °C",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 3}},
                                                          "required": ["city"]}}}]

C = []


def case(name, template, **vars):
    C.append((name, template, vars))


# whitespace control, trim_blocks, lstrip_blocks
case("ws_trim_blocks", "{% if true %}\nA\n{% endif %}\nB\n")
case("ws_lstrip", "  {% if true %}\n  x\n  {% endif %}\n  y")
case("ws_lstrip_not_var", "  {{ 'v' }}\n  {% set a = 1 %}\nz")
case("ws_plus", "  {%+ if true %}\nA{% endif +%}\nB")
case("ws_minus", "a  \n  {%- if true -%}  \n  b  \n {%- endif %}  c")
case("ws_var_minus", "a \n {{- 'x' -}} \n b")
case("ws_comment", "a\n  {# c #}\nb\n{#- d -#}\n  c")
case("ws_comment_inline", "x {# c #} y")
case("ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n")
case("ws_trailing_newlines", "a\n\n")
case("ws_tab_lstrip", "\t \t{% if true %}t{% endif %}")
case("ws_unicode_space_minus", "a\u3000\u00a0{%- if true %}b{% endif %}")
case("ws_block_after_text", "text {% if true %}\nX{% endif %}")
case("ws_nested", "{% for i in [1,2] %}\n    {% if i == 2 %}\n        two\n    {% endif %}\n{% endfor %}\n")
case("ws_minus_var_end_newlines", "{{ 'a' -}}\n\n\n  b")
# literals and printing
case("print_values", "{{ 1 }}|{{ 1.0 }}|{{ 1.5e-7 }}|{{ 1e16 }}|{{ 123456789.123 }}|{{ none }}|{{ true }}|{{ False }}|{{ 'a' ~ 1 ~ none }}")
case("print_containers", "{{ [1, 'a', none, true, 2.5, {'k': 'v'}] }}|{{ (1,) }}|{{ (1, 'b') }}|{{ {} }}|{{ [] }}")
case("print_repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'tab\\tnl\\n', '\\x00\\x7f\\u00e9\\u3000\\u200b'] }}")
case("print_input_values", "{{ v }}|{{ v.a }}|{{ v.f }}|{{ v.i }}|{{ v.big }}|{{ v.neg }}", v={"a": [1, 2.0], "f": 0.1, "i": 10, "big": 12345678901234567890, "neg": -0.0})
case("string_escapes", "{{ 'a\\nb\\tc\\\\d\\'e\\x41\\u00e9\\U0001F600\\101' }}|{{ \"q\\\"q\" }}|{{ 'un\\known' }}")
case("string_concat_adjacent", "{{ 'a' 'b' \"c\" }}")
case("numbers", "{{ 1_000 }}|{{ 0x1f }}|{{ 0o17 }}|{{ 0b101 }}|{{ 1.5_0 }}|{{ 2e3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % -3 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 7.5 // 2 }}|{{ -7.5 % 2 }}")
case("arith_mixed", "{{ 1 + 2.0 }}|{{ true + 1 }}|{{ 3 * 'ab' }}|{{ 'ab' * 2 }}|{{ [1] * 3 }}|{{ 'x' * -1 }}|{{ 10 - 2.5 }}|{{ -(3) }}|{{ +4 }}|{{ - 2 ** 2 }}")
case("concat_lists", "{{ [1] + [2, 3] }}|{{ (1,) + (2,) }}|{{ 'a' + 'b' }}")
# operators precedence
case("precedence", "{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 'a' ~ (1 + 2) }}|{{ (1 + 2) ~ 'a' }}|{{ not true or true }}|{{ not (true or true) }}|{{ 1 if false }}|{{ 1 if false else 2 if false else 3 }}")
case("filter_precedence", "{{ 'x' + ' y '|trim + 'z' }}|{{ -3|abs }}|{{ [3,1,2]|sort|first }}|{{ 'abc'|upper|lower }}")
case("and_or_values", "{{ 0 or 'x' }}|{{ '' and 'y' }}|{{ 'a' and 'b' }}|{{ none or [] }}|{{ [] or none }}")
case("compare_chain", "{{ 1 < 2 < 3 }}|{{ 1 < 3 < 2 }}|{{ 'a' < 'b' }}|{{ [1,2] < [1,3] }}|{{ 1 == 1.0 }}|{{ true == 1 }}|{{ 'a' == 'a' }}|{{ [1] == [1] }}|{{ (1,) == [1] }}|{{ {'a':1} == {'a':1} }}|{{ none == none }}|{{ 1 != 2 }}")
case("in_ops", "{{ 'a' in 'cat' }}|{{ 1 in [1,2] }}|{{ 'k' in {'k': 1} }}|{{ 'z' not in 'abc' }}|{{ 1.0 in [1] }}|{{ 'x' in undefined_thing }}")
# attribute / item access
case("access", "{{ m.role }}|{{ m['role'] }}|{{ m.missing }}|{{ l[0] }}|{{ l[-1] }}|{{ l.1 }}|{{ l[5] }}|{{ s[0] }}|{{ s[-1] }}|{{ m.items is callable }}",
     m={"role": "user"}, l=[1, 2, 3], s="héllo")
case("access_method_key_clash", "{{ d.items is defined }}|{{ d['items'] }}|{{ d.get('items') }}|{{ d.keys()|list }}", d={"items": [1], "keys": 2})
case("slices", "{{ l[1:] }}|{{ l[:-1] }}|{{ l[::-1] }}|{{ l[::2] }}|{{ l[1:3] }}|{{ l[-2:] }}|{{ l[5:] }}|{{ s[1:3] }}|{{ s[::-1] }}|{{ l[3:0:-1] }}|{{ l[-10:10] }}|{{ (1,2,3)[1:] }}",
     l=[0, 1, 2, 3, 4], s="añbc")
case("messages_reverse", "{% for m in messages[::-1] %}{{ loop.index0 }}:{{ m.role }} {% endfor %}", messages=MSGS)
# string methods
case("str_methods", "{{ s.startswith('ab') }}|{{ s.endswith(('x', 'yz')) }}|{{ s.upper() }}|{{ s.lower() }}|{{ s.title() }}|{{ s.capitalize() }}|{{ s.replace('b', 'B') }}|{{ s.replace('b', 'B', 1) }}|{{ s.find('c') }}|{{ s.rfind('b') }}|{{ s.count('b') }}",
     s="abcb xyz")
case("str_strip", "[{{ s.strip() }}]|[{{ s.lstrip() }}]|[{{ s.rstrip() }}]|[{{ s.strip(' \\n<') }}]|[{{ t.strip('\\n') }}]", s=" \n<x y>\t ", t="\n\nthink\n\n")
case("str_split", "{{ s.split() }}|{{ s.split(',') }}|{{ s.split(',', 1) }}|{{ s.rsplit(',', 1) }}|{{ s.split(None, 1) }}|{{ s.rsplit(None, 1) }}|{{ ' a  b '.split() }}|{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ ''.split(',') }}",
     s=" a,b , c,d ")
case("str_split_think", "{% set c = s.split('</think>')[-1].lstrip('\\n') %}{{ c }}|{{ s.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
     s="<think>\nreason\n</think>\n\nanswer")
case("str_join_is", "{{ '-'.join(['a', 'b']) }}|{{ 'abc'.isalpha() }}|{{ '12'.isdigit() }}|{{ ' '.isspace() }}|{{ 'ab'.islower() }}|{{ 'AB'.isupper() }}|{{ 'a1'.isalnum() }}")
case("python_whitespace", "[{{ s|trim }}]|[{{ s.strip() }}]|{{ s.split()|length }}", s="\u001c\u001fx\u0085 \u2003y\ufeff\u200b\u3000")
# filters
case("f_length", "{{ 'héllo'|length }}|{{ [1,2]|length }}|{{ {'a': 1}|count }}|{{ undefined_x|length }}")
case("f_default", "{{ x|default('d') }}|{{ none|default('d') }}|{{ ''|default('d', true) }}|{{ 'v'|d('d') }}|{{ x|default }}")
case("f_first_last", "{{ [1,2,3]|first }}|{{ [1,2,3]|last }}|{{ 'abc'|first }}|{{ []|first }}|{{ {'a':1,'b':2}|first }}")
case("f_join", "{{ [1, 'a', none]|join(', ') }}|{{ users|join('/', attribute='name') }}|{{ 'abc'|join('.') }}", users=[{"name": "x"}, {"name": "y"}])
case("f_map_select", "{{ users|map(attribute='name')|list }}|{{ users|selectattr('admin')|map(attribute='name')|join }}|{{ users|rejectattr('admin')|list|length }}|{{ [1,2,3,4]|select('odd')|list }}|{{ [1,2,3,4]|reject('even')|list }}|{{ ['a','B']|map('upper')|list }}|{{ users|selectattr('name', 'equalto', 'y')|list }}|{{ users|map(attribute='age', default=0)|list }}",
     users=[{"name": "x", "admin": True}, {"name": "y", "admin": False}])
case("f_sort_unique", "{{ [3,1,2]|sort }}|{{ ['b','A','c']|sort }}|{{ ['b','A','c']|sort(case_sensitive=true) }}|{{ [3,1,2]|sort(reverse=true) }}|{{ users|sort(attribute='n')|map(attribute='n')|list }}|{{ ['a','A','b']|unique|list }}",
     users=[{"n": 2}, {"n": 1}])
case("f_min_max_sum", "{{ [3,1,2]|min }}|{{ [3,1,2]|max }}|{{ [1,2,3]|sum }}|{{ [1.5,2]|sum }}|{{ ['b','A']|max }}|{{ []|max }}")
case("f_numbers", "{{ '42'|int }}|{{ ' 7 '|int }}|{{ '3.9'|int }}|{{ 'x'|int }}|{{ 'x'|int(5) }}|{{ 3.9|int }}|{{ '0x1f'|int(0, 16) }}|{{ '2.5'|float }}|{{ 'x'|float }}|{{ 3|float }}|{{ -3.5|abs }}|{{ 2.5|round }}|{{ 3.5|round }}|{{ 2.675|round(2) }}|{{ 3|round }}|{{ 2.1|round(0, 'ceil') }}|{{ 2.9|round(0, 'floor') }}")
case("f_string_case", "{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}|{{ 'a-b c(d'|title }}|{{ none|upper }}|{{ 12|string }}|{{ [1]|string }}|{{ none|string }}")
case("f_replace_reverse", "{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'abc'|reverse }}|{{ [1,2,3]|reverse|list }}")
case("f_indent", "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=true) }}")
case("f_items", "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}{% for k, v in d.items() %}{{ k }}:{{ v }};{% endfor %}{{ d.values()|list }}", d={"z": 1, "a": [2], "m": None})
case("f_list", "{{ 'ab'|list }}|{{ {'x': 1}|list }}|{{ (1,2)|list }}")
case("f_trim", "[{{ '  x  '|trim }}]|[{{ 'xxaxx'|trim('x') }}]|[{{ none|trim }}]|[{{ 5|trim }}]")
case("f_safe_attr", "{{ 5|safe }}|{{ d|attr('k') }}|{{ d|attr('nope') }}", d={"k": "v"})
# tojson
case("tojson_default", "{{ v|tojson }}", v={"b": 1, "a": [1.0, 2.5, None, True, "é<>&'\"\\\n\t\u0001"], "n": {"x": {}}, "e": [], "big": 12345678901234567890, "f": 1e-5, "g": 1e22, "h": 0.1})
case("tojson_indent", "{{ v|tojson(indent=2) }}|{{ v|tojson(indent=0) }}|{{ v|tojson(indent='\\t') }}", v={"a": [1, {"b": []}], "c": {}})
case("tojson_opts", "{{ v|tojson(sort_keys=true) }}|{{ v|tojson(ensure_ascii=true) }}|{{ v|tojson(separators=(',', ':')) }}|{{ v|tojson(true) }}", v={"z": "é😀", "a": [1, 2]})
case("tojson_values", "{{ 'x'|tojson }}|{{ 1|tojson }}|{{ 2.0|tojson }}|{{ none|tojson }}|{{ (1, 'a')|tojson }}|{{ tools|tojson }}", tools=TOOLS)
case("tojson_indent_tools", "{% for t in tools %}{{ t|tojson(indent=4) }}\n{% endfor %}", tools=TOOLS)
# tests
case("tests_types", "{% for v in values %}{{ v is string }}{{ v is number }}{{ v is integer }}{{ v is float }}{{ v is mapping }}{{ v is iterable }}{{ v is sequence }}{{ v is none }}{{ v is boolean }}{{ v is true }}{{ v is false }}{{ v is defined }};{% endfor %}",
     values=["s", 1, 1.5, {"a": 1}, [1], None, True, False])
case("tests_undefined", "{{ nope is defined }}|{{ nope is undefined }}|{{ nope is iterable }}|{{ nope is sequence }}|{{ nope is none }}|{{ nope is string }}|{{ m.x is defined }}|{{ m.role is defined }}", m={"role": "u"})
case("tests_args", "{{ 4 is divisibleby 2 }}|{{ 4 is divisibleby(3) }}|{{ 3 is odd }}|{{ 3 is even }}|{{ 'a' is in 'cat' }}|{{ 2 is in [1,2] }}|{{ 1 is eq 1 }}|{{ 1 is ne 1 }}|{{ 1 is lt 2 }}|{{ 1 is gt 2 }}|{{ 1 is le 1 }}|{{ 1 is ge 2 }}|{{ 'ab' is lower }}|{{ 'AB' is upper }}|{{ none is sameas none }}|{{ true is sameas true }}|{{ 1 is not none }}|{{ not 1 is none }}")
case("tests_callable", "{{ range is callable }}|{{ 'x' is callable }}|{{ 'x'.upper is callable }}")
# control flow
case("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('o', 'e') }};{% endfor %}")
case("for_else_filter", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.index }}{{ loop.length }},{% endfor %}")
case("for_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}")
case("for_unpack", "{% for a, b in [[1, 2], (3, 4)] %}{{ a }}{{ b }}{% endfor %}|{% for (a, b) in {'x': 1}.items() %}{{ a }}{{ b }}{% endfor %}")
case("for_dict_string", "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}|{% for c in 'hé' %}[{{ c }}]{% endfor %}|{% for x in nope %}never{% endfor %}")
case("for_nested_loop", "{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.last }};{% endfor %}")
case("range", "{{ range(3)|list }}|{{ range(1, 7, 2)|list }}|{{ range(5, 0, -2)|list }}|{{ range(0)|list }}")
case("scoping", "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 5 %}{{ x }}{% endfor %}{{ x }}{% if true %}{% set x = 9 %}{% endif %}{{ x }}")
case("namespace", "{% set ns = namespace(a=1, b='x') %}{% for i in [1,2,3] %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }}{{ ns.missing }}|{% set ns2 = namespace(d) %}{{ ns2.k }}", d={"k": "v"})
case("set_tuple_and_block", "{% set a, b = 1, 2 %}{{ a }}{{ b }}|{% set blk %}in {{ a }}\n{% endset %}[{{ blk }}]|{% set t = 1, 2 %}{{ t }}")
case("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }} {{ greet() }}|")
case("macro_recursive", "{% macro render(v) %}{% if v is mapping %}{{ '{' }}{% for k, x in v.items() %}{{ k }}={{ render(x) }};{% endfor %}{{ '}' }}{% elif v is iterable and v is not string %}[{% for x in v %}{{ render(x) }},{% endfor %}]{% else %}{{ v }}{% endif %}{% endmacro %}{{ render(d) }}",
     d={"a": [1, {"b": "c"}], "d": None})
case("macro_sees_outer", "{% set g = 'outer' %}{% macro m() %}{{ g }}{{ bos_token }}{% endmacro %}{{ m() }}", bos_token="<s>")
case("dict_literal_and_get", "{% set d = {'a': 1, 'b': {'c': 2}} %}{{ d.b.c }}{{ d['a'] }}{{ d.get('z', 'def') }}{{ d.get('a') }}{{ d.get('z') }}|{{ dict(x=1, y=2) }}")
case("cond_expr_no_else", "[{{ 'y' if false }}]|[{{ ('y' if false)|length }}]")
case("strftime", "{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %H:%M:%S %A %B %j %I%p %y %a') }}|{{ strftime_now('%-d %-m') }}")
case("add_generation_prompt_defined", "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ add_generation_prompt }}", add_generation_prompt=True)
case("enable_thinking_is_false", "{{ enable_thinking is defined and enable_thinking is false }}", enable_thinking=False)
case("content_is_string_iterable", "{% for m in messages %}{{ m.content is string }}{{ m.content is iterable }}{{ m.content is mapping }} {% endfor %}", messages=MSGS)
case("loop_index_neighbours", "{% for m in messages %}{% if loop.first or (messages[loop.index0 - 1].role != 'tool') %}S{% endif %}{% if loop.last or (messages[loop.index0 + 1].role != 'tool') %}E{% endif %}{% endfor %}", messages=MSGS)
case("in_none_tolerated", "{{ 'x' in ['x'] and 'y' not in {'y': 1} }}")
# errors
case("err_raise", "{{ raise_exception('Only user and assistant roles are supported!') }}")
case("err_raise_nonstr", "{{ raise_exception(42) }}")
case("err_concat_dict", "{{ 'a' + {'b': 1} }}")
case("err_concat_int", "{{ 'a' + 1 }}")
case("err_concat_precedence", "{{ 'a' ~ 1 + 2 }}")
case("err_concat_precedence2", "{{ 1 + 2 ~ 'a' }}")
case("err_concat_none", "{{ 'a' + none }}")
case("err_int_plus_str", "{{ 1 + 'a' }}")
case("err_none_plus", "{{ none + 'a' }}")
case("err_list_plus_str", "{{ [1] + 'a' }}")
case("err_in_none", "{{ 'a' in none }}")
case("err_in_int", "{{ 'a' in 5 }}")
case("err_int_in_str", "{{ 1 in 'abc' }}")
case("err_undefined_attr_call", "{{ m.content.startswith('x') }}", m={"content": ["x"]})
case("err_undefined_name_add", "{{ nope + 'x' }}")
case("err_undefined_attr_add", "{{ m.nope + 'x' }}", m={"a": 1})
case("err_undefined_element", "{{ l[5] + 1 }}", l=[1])
case("err_undefined_nested", "{{ m.a.b }}", m={})
case("err_none_attr", "{{ m.content.strip() }}", m={"content": None})
case("err_not_iterable", "{% for x in 5 %}{% endfor %}")
case("err_none_not_iterable", "{% for x in none %}{% endfor %}")
case("err_len_none", "{{ none|length }}")
case("err_compare", "{{ 1 < 'a' }}")
case("err_compare_undefined", "{{ nope < 1 }}")
case("err_div_zero", "{{ 1 / 0 }}")
case("err_call_str", "{{ 'abc'() }}")
case("err_unsafe_append", "{% set l = [1] %}{{ l.append(2) }}")
case("err_unsafe_pop", "{{ d.pop('a') }}", d={"a": 1})
case("err_tojson_undefined", "{{ nope|tojson }}")
case("err_unpack", "{% for a, b in [[1]] %}{% endfor %}")
case("err_items_list", "{{ [1]|items|list }}")
case("err_range_too_big", "{{ range(200000)|length }}")
case("err_ns_assign", "{% set x = 1 %}{% set x.a = 2 %}")
case("err_mul_seq", "{{ 'a' * 'b' }}")
case("err_neg_str", "{{ -'a' }}")
case("err_split_empty", "{{ 'a'.split('') }}")
case("err_join_int", "{{ ','.join([1]) }}")
case("err_undefined_iter_attr", "{{ nope.x }}")
case("err_undefined_call", "{{ nope() }}")
case("err_dict_items_attr", "{{ m.tool_calls[0].function.arguments + 'x' }}", m={"tool_calls": [{"function": {"arguments": {"a": 1}}}]})
case("err_role_check", "{% for m in messages %}{% if m.role not in ['user', 'assistant', 'system'] %}{{ raise_exception('Unsupported role: ' + m.role) }}{% endif %}{% endfor %}", messages=MSGS)

# second batch: lexer and value corners
case("lex_strings_with_delims", "{{ '%}' }}{{ '}}' }}{% set x = '{{' %}{{ x }}{{ {'a': {'b': 1}} }}{{ {'a': 1}['a'] }}")
case("ws_var_then_block_same_line", "{{ 'x' }}  {% if true %}y{% endif %}\n  {% if true %}z{% endif %}")
case("ws_comment_then_block", "{# c #}\n  {% if true %}\nq\n{% endif %}")
case("ws_block_end_minus_then_lstrip", "{% if true -%}\n  \n  {% if true %}w{% endif %}{% endif %}")
case("ws_start_of_template_lstrip", "   {% if true %}s{% endif %}")
case("ws_only_newline_after_var", "{{ 'a' }}\n{{ 'b' }}\n")
case("ws_minus_both_sides_var", "  x  {{- ' y ' -}}  z  ")
case("ws_plus_var", "  {{+ 'p' }}")
case("ws_multiline_tag", "{% if\n  true\n%}\nm{% endif %}")
case("ws_else_lines", "{% if false %}\na\n{% else %}\nb\n{% endif %}\n")
case("floats_print", "{{ 0.1 + 0.2 }}|{{ 1e15 }}|{{ 12345678901234567.0 }}|{{ 0.0001 }}|{{ 0.00001 }}|{{ 100.0 }}|{{ 4 / 2 }}|{{ 10 / 4 }}|{{ 1e300 * 1e10 }}|{{ -1e300 * 1e10 }}|{{ 2.5e-320 }}")
case("sandbox_dunder", "[{{ (0.1).__class__ }}]|[{{ ''.__len__ }}]|[{{ m._private }}]", m={"_private": "p"})
case("empty_messages_index", "{% if messages[0]['role'] == 'system' %}s{% endif %}", messages=[])
case("selectattr_count", "{{ messages|selectattr('role', 'equalto', 'user')|list|length }}|{{ messages|map(attribute='role')|join(',') }}|{{ messages|rejectattr('content', 'string')|list|length }}", messages=MSGS)
case("split_map_trim", "{{ ' a , b '.split(',')|map('trim')|list }}|{{ [1, 2]|map('string')|list }}|{{ [1, 'x']|join }}")
case("namespace_print", "{% set ns = namespace(a=1) %}{{ ns }}|{{ ns.a is defined }}")
case("set_undefined_plus", "{% set x = x + 1 %}")
case("is_string_none", "{{ none is string }}|{{ none is iterable }}|{{ none is mapping }}|{{ 1 is iterable }}")
case("unicode_escapes_template", "{{ '\\u00e9\\N' }}|{{ 'tab\\there' }}|ü{{ 'ü' }}")
case("loop_prev_next_first", "{% for x in [1] %}[{{ loop.previtem }}][{{ loop.nextitem }}]{{ loop.revindex }}{% endfor %}")
case("dict_iteration_order", "{% for k, v in d.items() %}{{ k }}{% endfor %}|{{ d|tojson }}|{{ d }}", d={"z": 1, "b": 2, "a": 3, "é": 4})
case("list_in_dict_keys", "{{ 'a' in d.keys() }}|{{ 1 in d.values() }}", d={"a": 1})
case("truthiness", "{% for v in [0, 0.0, '', [], {}, none, 'x', 1, [0], {'a': 0}] %}{{ 'T' if v else 'F' }}{% endfor %}")
case("string_index_unicode", "{{ s[1] }}{{ s[-2] }}{{ s|length }}{{ s[1:3] }}", s="a😀éb")
case("compare_strings", "{{ 'b' > 'a' }}|{{ 'B' < 'a' }}|{{ 'é' > 'z' }}|{{ 'abc' < 'abd' }}|{{ [1, 'a'] < [1, 'b'] }}|{{ 2 >= 2.0 }}")
case("default_chain", "{{ m.name|default(m.role)|upper }}|{{ (m.missing or 'fallback') }}", m={"role": "user"})
case("nested_ns_in_loop", "{% set ns = namespace(found=false, idx=-1) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% set ns.idx = loop.index0 %}{% endif %}{% endfor %}{{ ns.found }}{{ ns.idx }}", messages=MSGS)
case("macro_scope_set", "{% macro m() %}{% set inner = 1 %}{{ inner }}{% endmacro %}{{ m() }}{{ inner is defined }}")
case("macro_default_refers_param", "{% macro m(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ m('x') }}")
case("macro_too_many_args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}")
case("macro_bad_kwarg", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}")
case("filter_unknown_in_false_branch", "{% if false %}{{ x|nosuchfilter }}{% endif %}ok")
case("test_unknown_in_false_branch", "{% if false %}{{ x is nosuchtest }}{% endif %}ok")
case("tojson_nested_indent_empty", "{{ {'a': [], 'b': {}, 'c': [[]]}|tojson(indent=2) }}")
case("tojson_ensure_ascii_ctrl", "{{ '\\x7f\\x1f\\u2028'|tojson }}|{{ '\\x7f\\x1f\\u2028'|tojson(ensure_ascii=true) }}")
case("tojson_negative_indent", "{{ [1, 2]|tojson(indent=-1) }}")
case("int_float_conversions", "{{ '1_000'|int }}|{{ '-12'|int }}|{{ ' 3.5e2 '|float }}|{{ 'inf'|float }}|{{ '1e400'|float }}|{{ true|int }}|{{ none|int }}|{{ '12abc'|int(-1) }}|{{ '+7'|int }}")
case("round_filter_more", "{{ 0.5|round }}|{{ 1.5|round }}|{{ -2.5|round }}|{{ 1234.5|round(-2) }}|{{ 1.25|round(1) }}|{{ 7|round(-1) }}")
case("replace_empty", "{{ 'abc'.replace('', '-') }}|{{ 'aaa'|replace('a', '') }}")
case("str_count_find_unicode", "{{ 'héllo'.find('l') }}|{{ 'héllo'.rfind('l') }}|{{ 'aXbXc'.count('X') }}|{{ ''.count('') }}")
case("startswith_tuple_nonstr", "{{ 'abc'.startswith(('x', 1)) }}")
case("title_method_vs_filter", "{{ \"they're bill's\".title() }}|{{ \"they're bill's\"|title }}|{{ 'ǆemal'.title() }}")
case("capitalize_filter", "{{ 'ßa'|capitalize }}|{{ 'élan VITAL'|capitalize }}")
case("err_tuple_index_str", "{{ (1, 2)['a'] }}")
case("err_attr_on_int", "{{ 5.x + 1 }}")
case("err_float_mod_zero", "{{ 1.5 % 0 }}")
case("err_floordiv_zero", "{{ 1 // 0 }}")
case("err_mod_zero", "{{ 1 % 0 }}")
case("err_slice_step_zero", "{{ [1][::0] }}")
case("err_slice_float", "{{ [1][1.5:] }}")
case("err_loop_attr_missing", "{% for x in [1] %}{{ loop.nope + 1 }}{% endfor %}")
case("err_namespace_missing", "{% set ns = namespace() %}{{ ns.nope + 1 }}")
case("err_first_empty_plus", "{{ []|first + 1 }}")
case("err_cond_no_else_plus", "{{ ('a' if false) + 'b' }}")
case("err_sort_mixed", "{{ [1, 'a']|sort }}")
case("err_iterate_undefined_attr_of_none", "{% for x in none.items %}{% endfor %}")
case("err_dict_plus_dict", "{{ {} + {} }}")
case("err_str_minus", "{{ 'a' - 'b' }}")
case("err_unhashable_in", "{{ [1] in {'a': 1} }}")
case("err_startswith_none", "{{ 'abc'.startswith(none) }}")
# syntax errors (only checked to fail)
for i, bad in enumerate(["{{ 'a' +}}", "{% if x %}", "{{ }}", "{% for %}", "{% endif %}", "{{ 'a }}", "{% set %}", "{% bogus %}", "{{ (1 }}", "{{ 1 + }}", "{# x", "{{ x is }}", "{{ a | }}", "{% for x in y %}{% else %}{% break %}{% endfor %}", "{% macro m( %}{% endmacro %}"]):
    case("syntax_%02d" % i, bad)

# templates in the style of other families
LLAMA31_STYLE = """{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions." }}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\\n\\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""
TOOL_CONV = [
    {"role": "system", "content": "  You help.  "},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2.0}}}]},
    {"role": "tool", "content": "sunny"},
]
case("llama31_style_tools", LLAMA31_STYLE, messages=TOOL_CONV, tools=TOOLS, bos_token="<|begin_of_text|>", add_generation_prompt=True)
case("llama31_style_no_tools", LLAMA31_STYLE, messages=TOOL_CONV[:2], bos_token="<|begin_of_text|>", add_generation_prompt=False, date_string="01 Jan 2025")
case("llama31_style_two_calls", LLAMA31_STYLE, messages=[{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"function": {"name": "a", "arguments": {}}}, {"function": {"name": "b", "arguments": {}}}]}], tools=TOOLS, bos_token="<s>")

MISTRAL_STYLE = """{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
"""
case("mistral_style", MISTRAL_STYLE, messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}], bos_token="<s>", eos_token="</s>")
case("mistral_style_error", MISTRAL_STYLE, messages=[{"role": "user", "content": "U1"}, {"role": "user", "content": "U2"}], bos_token="<s>", eos_token="</s>")

PHI_STYLE = """{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'user' %}{{'<|user|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>
' + message['content'] + '<|end|>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>
' }}{% else %}{{ eos_token }}{% endif %}"""
case("phi_style", PHI_STYLE, messages=[{"role": "system", "content": ""}, {"role": "user", "content": "hi"}], eos_token="<|endoftext|>", add_generation_prompt=False)

CHATML_TOOLS_STYLE = """{%- macro json_to_python_type(json_spec) %}
{%- set basic_type_map = {
    "string": "str",
    "number": "float",
    "integer": "int",
    "boolean": "bool"
} %}

{%- if basic_type_map[json_spec.type] is defined %}
    {{- basic_type_map[json_spec.type] }}
{%- elif json_spec.type == "array" %}
    {{- "list[" +  json_to_python_type(json_spec|items) + "]"}}
{%- elif json_spec.type == "object" %}
    {%- if json_spec.additionalProperties is defined %}
        {{- "dict[str, " + json_to_python_type(json_spec.additionalProperties) + ']'}}
    {%- else %}
        {{- "dict" }}
    {%- endif %}
{%- elif json_spec.type is iterable %}
    {{- "Union[" }}
    {%- for t in json_spec.type %}
      {{- json_to_python_type({"type": t}) }}
      {%- if not loop.last %}
        {{- "," }}
    {%- endif %}
    {%- endfor %}
    {{- "]" }}
{%- else %}
    {{- "Any" }}
{%- endif %}
{%- endmacro %}

{{- bos_token }}
{{- '<|im_start|>system\\n' }}
{%- for tool in tools %}
    {%- if tool.function is defined %}
        {%- set tool = tool.function %}
    {%- endif %}
    {{- '{"type": "function", "function": ' }}
    {{- '{"name": "' + tool.name + '", ' }}
    {{- '"description": "' + tool.name + '(' }}
    {%- for param_name, param_fields in tool.parameters.properties|items %}
        {{- param_name + ": " + json_to_python_type(param_fields) }}
        {%- if not loop.last %}
            {{- ", " }}
        {%- endif %}
    {%- endfor %}
    {{- ")" }}
    {%- if tool.return is defined %}
        {{- " -> " + json_to_python_type(tool.return) }}
    {%- endif %}
    {{- " - " + tool.description + "\\n\\n" }}
    {{- '", "parameters": ' }}
    {%- if tool.parameters.properties | length == 0 %}
        {{- "{}" }}
    {%- else %}
        {{- tool.parameters|tojson }}
    {%- endif %}
    {{- "}" }}
    {%- if not loop.last %}
        {{- "\\n" }}
    {%- endif %}
{%- endfor %}
{{- '<|im_end|>\\n' }}
"""
case("chatml_tools_macro_style", CHATML_TOOLS_STYLE, messages=[], bos_token="",
     tools=[{"type": "function", "function": {"name": "f", "description": "does f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": ["integer", "string"]}, "c": {"type": "object", "additionalProperties": {"type": "number"}}, "d": {"type": "boolean"}}}}}])
case("chatml_tools_macro_null_recursion", CHATML_TOOLS_STYLE, messages=[], bos_token="",
     tools=[{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {"b": {"type": ["integer", "null"]}}}}}])


def render(template, vars):
    try:
        t = env.from_string(template)
    except (TemplateSyntaxError, SyntaxError):
        return {"syntax_error": True}
    try:
        return {"rendered": t.render(**vars)}
    except Exception as e:
        return {"error": {"type": type(e).__name__, "message": str(e)}}


out = []
for name, template, vars in C:
    r = {"name": name, "template": template, "vars": vars}
    r.update(render(template, vars))
    out.append(r)

with open("python_cases.json", "w", encoding="utf-8") as f:
    f.write('{"jinja2": "%s", "cases": [\n' % jinja2.__version__)
    f.write(",\n".join(json.dumps(r, ensure_ascii=False) for r in out))
    f.write("\n]}\n")
print(len(out), "cases")
