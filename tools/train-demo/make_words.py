"""Writes words.txt: the demo model's vocabulary of common English words, most frequent first.

Taken once from the `wordfreq` PyPI package (its English frequency list) and kept in the
repository, so that data.py needs neither: the 3,000 most frequent words that are plain
lower-case ASCII letters and are in Debian's wamerican dictionary (which drops names and
fragments; it is lower-case only, so the days, the months but May and March, and "I"
are added in their own case), less a short block list (swearing, slurs, sexual words, party names,
abbreviations that espeak-ng spells out), plus the words of numbers, days, months and colours
wherever they fall outside the top 3,000 (placed at 400, "I" at 8).

usage: pip install wordfreq==3.1.1; apt-get install wamerican; python3 make_words.py > words.txt
Not here: any grammar; data.py only draws words from this list.
"""
from wordfreq import top_n_list

N = 3000
BLOCK = set("""shit fuck fucking fucked fucks porn sex sexual sexy sexually bitch bitches ass asses
dick pussy cock nude naked rape raped whore slut damn crap hell gay lesbian nigga nigger retard
retarded boobs boob penis vagina horny orgasm cum tits semen anal dildo masturbation erotic
democrats republicans democrat republican democratic republic liberal conservative
multi semi ft vs etc st mr mrs dr ok ii iii pc tv uk ad
hitler nazi nazis jesus christ christian christians muslim muslims islam islamic jewish jews
bible church god lord allah terrorist terrorists terrorism drug drugs cocaine weed marijuana
kill killed killing killer murder murdered suicide
""".split())
EXTRA = """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety
hundred thousand million first second third fourth fifth sixth seventh eighth ninth tenth
Monday Tuesday Wednesday Thursday Friday Saturday Sunday
January February April June July August September October November December
red orange yellow green blue purple pink brown black white gray grey silver gold
morning afternoon evening night today tomorrow yesterday week month year hour minute""".split()

words = set(l.strip() for l in open("/usr/share/dict/american-english", encoding="utf-8"))
keep = []
for w in top_n_list("en", 20000):
    if len(keep) == N:
        break
    if w.isascii() and w.isalpha() and w.islower() and w in words and w not in BLOCK \
            and (len(w) > 1 or w == "a") and w not in keep:
        keep.append(w)
# data.py draws a word with a weight falling with its place here; the added words go where
# words of middling frequency are, "I" among the most frequent
keep[400:400] = [w for w in EXTRA if w not in keep]
keep.insert(8, "I")
print("\n".join(keep))
