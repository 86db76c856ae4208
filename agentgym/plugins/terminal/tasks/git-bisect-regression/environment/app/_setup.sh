#!/usr/bin/env bash
# Builds /app/repo: 40 commits after tag v1.0; one of them breaks word counting.
set -euo pipefail
export GIT_AUTHOR_NAME="Ola Berg" GIT_AUTHOR_EMAIL="ola@example.com"
export GIT_COMMITTER_NAME="Ola Berg" GIT_COMMITTER_EMAIL="ola@example.com"
export GIT_CONFIG_NOSYSTEM=1
n=0
commit() {
  n=$((n + 1))
  export GIT_AUTHOR_DATE="$((1716000000 + n * 5400)) +0000" GIT_COMMITTER_DATE="$((1716000000 + n * 5400)) +0000"
  git add -A
  git commit -q -m "$1"
}
mkdir -p /app/repo && cd /app/repo
git init -q -b main
git config user.name "Ola Berg"
git config user.email "ola@example.com"
cat > textstats.py <<'T'
"""Small text statistics."""


def word_count(text):
    return len(text.split())


def line_count(text):
    return len(text.splitlines())
T
printf '# textstats\n' > CHANGELOG.md
commit "Release 1.0"
git tag v1.0

topics=(titles vowels digits punctuation sentences paragraphs acronyms emails urls hashtags
        mentions quotes numbers dates times emoji tabs headings bullets tables
        caps ratios averages medians spans gaps ends starts pairs triples
        palindromes anagrams prefixes suffixes stems roots lemmas tokens shingles grams)
for i in "${!topics[@]}"; do
  topic=${topics[$i]}
  cat >> textstats.py <<T


def count_${topic}(text):
    return sum(1 for token in text.split() if token.startswith("${topic:0:1}"))
T
  printf -- '- count_%s\n' "$topic" >> CHANGELOG.md
  if [ "$i" -eq 26 ]; then
    sed -i 's/    return len(text.split())$/    return len(text.split(" "))/' textstats.py
    commit "Tidy up helpers for ${topic}"
  else
    commit "Add count_${topic}"
  fi
done
