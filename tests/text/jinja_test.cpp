// The Jinja engine (src/text/jinja/): expressions, filters, tests, whitespace control, loops,
// macros, methods, and errors that name the line and column. Expected strings are what
// @huggingface/jinja renders (the reference tests/text/jinja_npm.mjs compares with on real templates).
#include <gtest/gtest.h>

#include <pthread.h>

#include <string>

#include "text/jinja/template.h"

namespace strata::jinja {
namespace {

using ojson = nlohmann::ordered_json;

std::string render(const std::string& src, const ojson& ctx = ojson::object()) {
  auto t = Template::parse(src);
  if (!t.ok()) return "PARSE ERROR: " + t.message();
  auto r = t->render(ctx);
  if (!r.ok()) return "ERROR: " + r.message();
  return *r;
}

TEST(Jinja, TextAndExpressions) {
  EXPECT_EQ(render("hello"), "hello");
  EXPECT_EQ(render("hello\n"), "hello");  // one trailing newline is dropped
  EXPECT_EQ(render("{{ 1 + 2 * 3 }}"), "7");
  EXPECT_EQ(render("{{ (1 + 2) * 3 }}"), "9");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }}"), "3 -4 1 2 1024");
  EXPECT_EQ(render("{{ 7 / 2 }} {{ 4 / 2 }}"), "3.5 2.0");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }}"), "a1");
  EXPECT_EQ(render("{{ 'a' + 'b' }}{{ [1] + [2] }}"), "ab[1, 2]");
  EXPECT_EQ(render("{{ x }}|{{ none }}|{{ true }}|{{ False }}", {{"x", ojson()}}), "||true|false");
  EXPECT_EQ(render("{{ 'yes' if x else 'no' }}{{ 'y' if not x }}", {{"x", false}}), "noy");
  EXPECT_EQ(render("{{ x and 'a' or 'b' }}", {{"x", 0}}), "b");
  EXPECT_EQ(render("{{ 1 < 2 and 2 <= 2 and 3 > 2 and 'a' != 'b' and 1 == 1.0 }}"), "true");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}"),
            "true true true true");
  EXPECT_EQ(render("{{ {'a': 1, 'b': [true, none, 'x\"']} }}"), "{\"a\": 1, \"b\": [true, null, \"x\\\"\"]}");
  EXPECT_EQ(render("{{ m.role }} {{ m['content'] }} {{ m.missing is defined }}",
                   {{"m", {{"role", "user"}, {"content", "hi"}}}}),
            "user hi false");
  EXPECT_EQ(render("{{ 'abcdef'[1:3] }} {{ 'abc'[::-1] }} {{ [1, 2, 3][-1] }} {{ [1, 2, 3][:-1] }}"),
            "bc cba 3 [1, 2]");
  EXPECT_EQ(render("{{ 'a' 'b' }}{{ \"\\n\" == '\\n' }}"), "abtrue");
}

TEST(Jinja, WhitespaceControl) {
  // trim_blocks and lstrip_blocks as transformers renders chat templates.
  EXPECT_EQ(render("{% if true %}\n  yes\n{% endif %}\n"), "  yes\n");
  EXPECT_EQ(render("a\n    {% if true %}b{% endif %}"), "a\nb");
  EXPECT_EQ(render("a  {{- 'b' -}}  \n c"), "abc");
  EXPECT_EQ(render("a {%- if true -%} b {%- endif -%} c"), "abc");
  EXPECT_EQ(render("a {#- note -#} b{# another #}c"), "abc");
  EXPECT_EQ(render("a\n{# c #}\n  {%- if true %}b{% endif %}"), "a\nb");  // no strip across a comment
  EXPECT_EQ(render("{% generation %}x{% endgeneration %}"), "x");
}

TEST(Jinja, Loops) {
  const ojson ctx = {{"xs", {"a", "b", "c"}}};
  EXPECT_EQ(
      render("{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", ctx),
      "1a,2b,3c");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.length "
                   "}};{% endfor %}",
                   ctx),
            "03true3;12false3;21false3;");
  EXPECT_EQ(render("{% for x in xs if x != 'b' %}{{ x }}{{ loop.length }}{% endfor %}", ctx), "a2c2");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %}"), "a=1 b=2 ");
  EXPECT_EQ(render("{% for x in xs %}{% if x == 'b' %}{% break %}{% endif %}{{ x }}{% endfor %}", ctx), "a");
  EXPECT_EQ(render("{% for x in xs %}{% if x == 'b' %}{% continue %}{% endif %}{{ x }}{% endfor %}", ctx),
            "ac");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.previtem }}{{ loop.nextitem }}|{% endfor %}", ctx), "b|ac|b|");
  EXPECT_EQ(
      render("{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}"),
      "012135");
  // A set inside a loop stays there; a namespace carries values out.
  EXPECT_EQ(render("{% set n = 0 %}{% set ns = namespace(n=0) %}{% for x in xs %}{% set n = n + 1 %}"
                   "{% set ns.n = ns.n + 1 %}{% endfor %}{{ n }} {{ ns.n }}",
                   ctx),
            "0 3");
}

TEST(Jinja, SetMacroCallFilterBlocks) {
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(render("{% set x %}  inner {{ 1 }}  {% endset %}[{{ x }}]"), "[  inner 1  ]");
  EXPECT_EQ(render("{% set x | trim %}  inner  {% endset %}[{{ x }}]"), "[inner]");
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Ann') }} {{ greet('Bo', punct='?') }}"),
            "Hi Ann! Hi Bo?");
  EXPECT_EQ(render("{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}body{% endcall %}"),
            "<body>");
  EXPECT_EQ(render("{% filter upper %}abc{% endfilter %}"), "ABC");
  // A caller kept past its call block is an error, not a dangling scope.
  EXPECT_NE(render("{% set ns = namespace(c=none) %}{% macro keep() %}{% set ns.c = caller %}{% endmacro %}"
                   "{% for i in [1] %}{% call keep() %}x{% endcall %}{% endfor %}{{ ns.c() }}")
                .find("caller() called after its {% call %} block ended"),
            std::string::npos);
}

TEST(Jinja, Filters) {
  EXPECT_EQ(render("{{ '  x  ' | trim }}|{{ 'ab' | upper }}|{{ 'AB' | lower }}|{{ 'hello world' | title }}|"
                   "{{ 'hELLO' | capitalize }}"),
            "x|AB|ab|Hello World|Hello");
  EXPECT_EQ(render("{{ [1, 2] | length }} {{ 'héllo' | length }} {{ {'a': 1} | count }}"), "2 5 1");
  EXPECT_EQ(
      render("{{ ['a', 'b'] | join(', ') }} {{ [3, 1, 2] | sort | list }} {{ [1, 2, 1] | unique | list }}"),
      "a, b [1, 2, 3] [1, 2]");
  EXPECT_EQ(render("{{ x | default('d') }} {{ '' | default('d', true) }} {{ 'v' | default('d') }}"), "d d v");
  EXPECT_EQ(render("{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}{{ [1, 2] | reverse | list }}"), "13[2, 1]");
  EXPECT_EQ(
      render("{{ 'a-b-c' | replace('-', '+') }} {{ '3' | int + 1 }} {{ '2.5' | float }} {{ 3 | string }}"),
      "a+b+c 4 2.5 3");
  EXPECT_EQ(render("{{ 'a\\nb' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}"), "a\n  b|  a\n  b");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | dictsort }}"), "[[\"a\", 2], [\"b\", 1]]");
  const ojson ms = {
      {"ms", {{{"role", "user"}, {"n", 1}}, {{"role", "tool"}, {"n", 2}}, {{"role", "user"}, {"n", 3}}}}};
  EXPECT_EQ(render("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='n') | list }}", ms),
            "[1, 3]");
  EXPECT_EQ(render("{{ ms | rejectattr('role', 'eq', 'user') | list | length }}", ms), "1");
  EXPECT_EQ(render("{{ ms | map(attribute='role') | join(',') }} {{ [1, 2] | map('string') | join }}", ms),
            "user,tool,user 12");
  EXPECT_EQ(render("{{ [1, 0, 2] | select | list }} {{ [1, 2, 3, 4] | reject('odd') | list }}"),
            "[1, 2] [2, 4]");
  EXPECT_EQ(render("{{ {'a': 1} | items | list }}"), "[[\"a\", 1]]");
}

TEST(Jinja, ToJson) {
  const ojson ctx = {{"t", {{"name", "f"}, {"args", {{"b", 1}, {"a", {1, 2}}}}, {"s", "é\n"}}}};
  EXPECT_EQ(render("{{ t | tojson }}", ctx),
            "{\"name\": \"f\", \"args\": {\"b\": 1, \"a\": [1, 2]}, \"s\": \"é\\n\"}");
  EXPECT_EQ(render("{{ t.args | tojson(indent=2) }}", ctx),
            "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2\n  ]\n}");
  EXPECT_EQ(render("{{ t.args | tojson(sort_keys=true) }}", ctx), "{\"a\": [1, 2], \"b\": 1}");
  EXPECT_EQ(render("{{ t.args | tojson(separators=(',', ':')) }}", ctx), "{\"b\":1,\"a\":[1,2]}");
  EXPECT_EQ(render("{{ t.s | tojson(ensure_ascii=true) }}", ctx), "\"\\u00e9\\n\"");
  EXPECT_EQ(render("{{ 0.5 | tojson }} {{ 2.0 | tojson }} {{ 0.5 }} {{ x | tojson }}"), "0.5 2 0.5 null");
}

TEST(Jinja, Tests) {
  const ojson ctx = {{"s", "x"}, {"d", ojson::object()}, {"l", ojson::array()}, {"n", ojson()}, {"i", 3}};
  EXPECT_EQ(render("{{ s is string }}{{ d is mapping }}{{ l is iterable }}{{ l is sequence }}{{ n is none }}"
                   "{{ i is number }}{{ i is integer }}{{ u is undefined }}{{ s is not defined }}",
                   ctx),
            "truetruetruetruetruetruetruetruefalse");
  EXPECT_EQ(
      render("{{ true is boolean }}{{ false is false }}{{ i is odd }}{{ i is even }}{{ i is divisibleby 3 }}"
             "{{ i is eq 3 }}{{ i is equalto(4) }}{{ 'x' is in ['x'] }}",
             ctx),
      "truetruetruefalsetruetruefalsetrue");
}

TEST(Jinja, Methods) {
  EXPECT_EQ(
      render(
          "{{ '  a  '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'a  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}"),
      "a|axx|a|[\"a\", \"b\", \"\", \"c\"]");
  EXPECT_EQ(render("{{ ' a  b '.split() }} {{ 'a.b.c'.split('.', 1) }} {{ 'a.b.c'.rsplit('.', 1) }}"),
            "[\"a\", \"b\"] [\"a\", \"b.c\"] [\"a.b\", \"c\"]");
  EXPECT_EQ(
      render("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'aXa'.replace('a', 'b') }}"),
      "true true bXb");
  EXPECT_EQ(
      render("{{ 'a{}b{}'.format(1, 'x') }} {{ 'ab'.upper() }}{{ 'AB'.lower() }} {{ 'abc'.find('c') }}"),
      "a1bx ABab 2");
  EXPECT_EQ(render("{{ d.get('a') }} {{ d.get('z', 'dflt') }} {{ d.get('z') is none }} {{ d.keys() | list }} "
                   "{{ d.values() | list }}",
                   {{"d", {{"a", 1}, {"b", 2}}}}),
            "1 dflt true [\"a\", \"b\"] [1, 2]");
  EXPECT_EQ(render("{% set l = [1] %}{% set _ = l.append(2) %}{{ l }} {{ l.pop() }} {{ l }}"),
            "[1, 2] 2 [1]");
}

TEST(Jinja, ErrorsNameTheLineAndColumn) {
  EXPECT_EQ(render("a\n{{ 1 + }}"), "PARSE ERROR: line 2, column 8: expected an expression, got }}");
  EXPECT_EQ(render("{% if x %}never closed"),
            "PARSE ERROR: line 1, column 23: unexpected end of template: "
            "expected {% endif %}");
  EXPECT_EQ(render("x\n  {{ 'a' | nosuch }}"), "ERROR: line 2, column 12: unknown filter 'nosuch'");
  EXPECT_EQ(render("{{ 1 is nosuch }}"), "ERROR: line 1, column 6: unknown test 'nosuch'");
  EXPECT_EQ(render("\n\n{{ raise_exception('bad role') }}"),
            "ERROR: line 3, column 19: raise_exception: bad role");
  EXPECT_EQ(render("{% for x in y %}{% endif %}"),
            "PARSE ERROR: line 1, column 20: unexpected {% endif %}: no open block takes it here");
  EXPECT_EQ(render("{% include 'x' %}"),
            "PARSE ERROR: line 1, column 4: unknown or unsupported statement 'include'");
  EXPECT_EQ(render("{{ 'unterminated }}"), "PARSE ERROR: line 1, column 4: unterminated string");
  EXPECT_EQ(render("{{ 1 / 0 }}"), "ERROR: line 1, column 6: division by zero");
  EXPECT_EQ(render("{{ nope() }}"), "ERROR: line 1, column 8: 'nope' is undefined (not a function)");
}

TEST(Jinja, UntrustedTemplatesAreBounded) {
  // Endless recursion, huge output, deep nesting: errors, never a crash.
  EXPECT_NE(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("calls nested deeper than 100"),
            std::string::npos);
  Limits small;
  small.max_output = 1000;
  auto t = Template::parse("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}");
  ASSERT_TRUE(t.ok());
  auto r = t->render(ojson::object(), small);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("output is larger than 1000 bytes"), std::string::npos) << r.message();
  small.max_steps = 1000;
  small.max_output = size_t{1} << 30;
  auto t2 = Template::parse("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}");
  ASSERT_TRUE(t2.ok());
  auto r2 = t2->render(ojson::object(), small);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.message().find("more than 1000 steps"), std::string::npos) << r2.message();
  EXPECT_NE(render("{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}")
                .find("nested deeper than 200"),
            std::string::npos);
  EXPECT_NE(render("{{ " + std::string(300, '[')).find("PARSE ERROR"), std::string::npos);
  std::string chain = "{{ 1";  // long chains nest without parser recursion: bounded too
  for (int k = 0; k < 5000; ++k) chain += " + 1";
  EXPECT_NE(render(chain + " }}").find("expression nested deeper than 300"), std::string::npos);
  std::string filters = "{{ 'x'";
  for (int k = 0; k < 5000; ++k) filters += " | trim";
  EXPECT_NE(render(filters + " }}").find("expression nested deeper than 300"), std::string::npos);
  // Lists nested a million deep are freed without recursing; a list holding itself compares and
  // prints as an error, not a stack overflow.
  // (Rendered on a thread with a 512 KiB stack, which recursive freeing of 50,000 levels overflows.)
  std::string deep;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 512 << 10);
  pthread_t th;
  ASSERT_EQ(pthread_create(
                &th, &attr,
                [](void* out) -> void* {
                  *static_cast<std::string*>(out) = render(
                      "{% set ns = namespace(l=[]) %}{% for i in range(50000) %}{% set ns.l = [ns.l] %}"
                      "{% endfor %}done");
                  return nullptr;
                },
                &deep),
            0);
  pthread_join(th, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_EQ(deep, "done");
  EXPECT_EQ(render("{% set l = [] %}{% set _ = l.append(l) %}{{ l == l }}"), "false");
  EXPECT_NE(
      render("{% set l = [] %}{% set _ = l.append(l) %}{{ l | tojson }}").find("nesting deeper than 256"),
      std::string::npos);
  // Cycles a template makes (a namespace holding itself, a list in a dropped loop scope holding
  // itself) are emptied when the render ends: nothing leaks.
  const int64_t live = ContainerArena::live();
  EXPECT_EQ(
      render(
          "{% set ns = namespace() %}{% set ns.me = ns %}{% for i in range(3) %}{% set l = [i] %}"
          "{% set _ = l.append(l) %}{% set _ = l.append({'l': l}) %}{% endfor %}{{ ns.me.me is defined }}"),
      "true");
  EXPECT_EQ(ContainerArena::live(), live);
  EXPECT_NE(render("{{ 'x' * 100000000 }}").find("longer than 64 MiB"), std::string::npos);
}

}  // namespace
}  // namespace strata::jinja
