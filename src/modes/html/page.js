// pi's session page: the tree selects which path is shown; code blocks are highlighted.
(function () {
  "use strict";
  var articles = new Map();
  document.querySelectorAll("article.entry").forEach(function (a) {
    articles.set(a.dataset.seq, a);
  });
  var rows = Array.prototype.slice.call(document.querySelectorAll("nav#tree li.node"));

  // The path from the root to `seq`, by the parents the page records.
  function pathTo(seq) {
    var path = new Set();
    var at = seq;
    while (at !== undefined && at !== "" && !path.has(at)) {
      path.add(at);
      var article = articles.get(at);
      at = article ? article.dataset.parent : undefined;
    }
    return path;
  }

  function show(seq, scroll) {
    var path = pathTo(seq);
    articles.forEach(function (article, key) {
      article.hidden = !path.has(key);
      article.classList.toggle("selected", key === seq);
    });
    rows.forEach(function (row) {
      row.classList.toggle("active", path.has(row.dataset.seq));
      row.classList.toggle("selected", row.dataset.seq === seq);
    });
    highlightVisible();
    var target = articles.get(seq);
    if (scroll && target) target.scrollIntoView({ block: "nearest" });
  }

  // Folding a branch point hides every row below it in the tree.
  function fold(index) {
    var row = rows[index];
    var folded = row.classList.toggle("folded");
    var depth = Number(row.dataset.depth);
    for (var i = index + 1; i < rows.length; i++) {
      if (Number(rows[i].dataset.depth) <= depth) break;
      rows[i].classList.toggle("folded-away", folded);
    }
  }

  rows.forEach(function (row, index) {
    row.querySelector("button.goto").addEventListener("click", function () {
      show(row.dataset.seq, true);
    });
    var toggle = row.querySelector("button.fold");
    if (toggle) toggle.addEventListener("click", function () { fold(index); });
  });

  // A small highlighter: comments, strings, numbers, keywords and types per language family.
  var families = {
    c: { line: "//", block: true, words: "auto break case char const continue default do double else enum extern float for goto if inline int long register return short signed sizeof static struct switch typedef union unsigned void volatile while class public private protected namespace template typename new delete this virtual override final try catch throw bool true false nullptr using import package interface extends implements func go defer chan map range select type var fn let mut pub impl trait where match loop mod crate self Self super use as dyn async await move ref unsafe null undefined function yield of in instanceof typeof let export from declare readonly abstract static" },
    py: { line: "#", block: false, words: "and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return True try while with yield self" },
    sh: { line: "#", block: false, words: "if then else elif fi for while until do done case esac in function return local export set unset echo cd exit source" },
    json: { line: null, block: false, words: "true false null" },
    sql: { line: "--", block: true, words: "select from where insert into values update set delete create table index view drop alter join left right inner outer on group by order having limit offset as and or not null is in exists union all distinct primary key references begin commit rollback with" }
  };
  var aliases = { rust: "c", rs: "c", js: "c", javascript: "c", ts: "c", typescript: "c", tsx: "c",
    jsx: "c", java: "c", go: "c", cpp: "c", "c++": "c", h: "c", cs: "c", kotlin: "c", swift: "c",
    scala: "c", php: "c", python: "py", py: "py", ruby: "py", rb: "py", toml: "py", yaml: "py",
    yml: "py", bash: "sh", sh: "sh", shell: "sh", zsh: "sh", console: "sh", json: "json",
    jsonl: "json", sql: "sql", c: "c" };

  function escapeHtml(text) {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function highlightCode(text, family) {
    var spec = families[family];
    var keywords = new Set(spec.words.split(" "));
    var out = "";
    var i = 0;
    var n = text.length;
    function span(cls, s) { out += "<span class=\"hl-" + cls + "\">" + escapeHtml(s) + "</span>"; }
    while (i < n) {
      var c = text[i];
      if (spec.line && text.startsWith(spec.line, i)) {
        var end = text.indexOf("\n", i);
        if (end < 0) end = n;
        span("comment", text.slice(i, end));
        i = end;
      } else if (spec.block && text.startsWith("/*", i)) {
        var close = text.indexOf("*/", i + 2);
        close = close < 0 ? n : close + 2;
        span("comment", text.slice(i, close));
        i = close;
      } else if (c === "\"" || c === "'" || c === "`") {
        var j = i + 1;
        while (j < n && text[j] !== c && text[j] !== "\n") j += text[j] === "\\" ? 2 : 1;
        j = Math.min(n, j + 1);
        span("string", text.slice(i, j));
        i = j;
      } else if (/[0-9]/.test(c) && (i === 0 || !/[\w$]/.test(text[i - 1]))) {
        var m = /^(0x[0-9a-fA-F_]+|[0-9][0-9_]*(\.[0-9_]+)?([eE][+-]?[0-9]+)?)/.exec(text.slice(i, i + 64));
        var num = m ? m[0] : c;
        span("number", num);
        i += num.length;
      } else if (/[A-Za-z_$]/.test(c)) {
        var k = i + 1;
        while (k < n && /[\w$]/.test(text[k])) k++;
        var word = text.slice(i, k);
        var lower = family === "sql" ? word.toLowerCase() : word;
        if (keywords.has(lower)) span("keyword", word);
        else if (family === "c" && /^[A-Z][a-z0-9]/.test(word)) span("type", word);
        else out += escapeHtml(word);
        i = k;
      } else {
        out += escapeHtml(c);
        i++;
      }
    }
    return out;
  }

  function highlightDiff(text) {
    return text.split("\n").map(function (line) {
      if (/^\+(?!\+\+)/.test(line)) return "<span class=\"hl-add\">" + escapeHtml(line) + "</span>";
      if (/^-(?!--)/.test(line)) return "<span class=\"hl-del\">" + escapeHtml(line) + "</span>";
      return escapeHtml(line);
    }).join("\n");
  }

  function highlight(code) {
    if (code.dataset.highlighted) return;
    code.dataset.highlighted = "1";
    var match = /language-([\w+#-]+)/.exec(code.className);
    if (!match) return;
    var lang = match[1].toLowerCase();
    var text = code.textContent;
    if (text.length > 200000) return;
    if (lang === "diff" || lang === "patch") code.innerHTML = highlightDiff(text);
    else if (aliases[lang]) code.innerHTML = highlightCode(text, aliases[lang]);
  }

  function highlightVisible() {
    articles.forEach(function (article) {
      if (!article.hidden) article.querySelectorAll("pre > code[class*=language-]").forEach(highlight);
    });
  }

  document.querySelectorAll("details").forEach(function (details) {
    details.addEventListener("toggle", function () {
      if (details.open) details.querySelectorAll("pre > code[class*=language-]").forEach(highlight);
    });
  });
  var leaf = document.querySelector("nav#tree li.leaf");
  if (leaf) leaf.classList.add("selected");
  highlightVisible();
  window.piShow = function (seq) { show(String(seq), true); };
})();
