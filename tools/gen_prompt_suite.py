#!/usr/bin/env python3
"""Generate sglab's bundled prompt suite (sglab/load/data/prompt_suite.jsonl).

Every prompt is assembled from this file's own templates and word lists (no dataset text is copied),
seeded, so the output is byte-identical on every run. Categories: chat, code, maths, summarisation,
extraction, translation, long-context. Each line is one OpenAI-style record:
  {"id", "category", "messages", "output_tokens", "max_tokens"}
`output_tokens` is the target reply length (what a fixed-length run asks for with ignore_eos);
`max_tokens` is the cap sent when the run lets the model stop by itself.

    python tools/gen_prompt_suite.py            # rewrite the data file
    python tools/gen_prompt_suite.py --check    # exit 1 if the data file is not what this script writes
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "sglab" / "load" / "data" / "prompt_suite.jsonl"
SEED = 20261201
PER_CATEGORY = {"chat": 45, "code": 45, "maths": 45, "summarisation": 45, "extraction": 45,
                "translation": 45, "long-context": 40}
# target reply lengths per category (tokens), drawn uniformly; the simulator's natural lengths mirror these
OUTPUT_TOKENS = {"chat": (80, 400), "code": (150, 600), "maths": (120, 500), "summarisation": (60, 250),
                 "extraction": (40, 200), "translation": (40, 300), "long-context": (100, 400)}
SYSTEM_PROMPTS = ("You are a helpful assistant.", "You are a concise, friendly assistant.",
                  "You are an expert assistant. Answer accurately and explain your reasoning briefly.")

# ---------------------------------------------------------------------------------------------- words
PLACES = ("Lisbon", "Kyoto", "Vancouver", "Marrakesh", "Oslo", "Buenos Aires", "Hanoi", "Edinburgh", "Cape Town",
          "Tallinn", "Seville", "Queenstown", "Montreal", "Ljubljana", "Valparaiso", "Tbilisi")
MONTHS = ("January", "March", "April", "May", "June", "August", "September", "October", "November", "December")
INGREDIENTS = ("chickpeas", "spinach", "salmon", "sweet potatoes", "lentils", "mushrooms", "tofu", "leeks",
               "eggplant", "feta", "quinoa", "butternut squash", "chicken thighs", "black beans", "zucchini")
MEALS = ("weeknight dinner", "vegetarian lunch", "one-pot dinner", "breakfast", "picnic dish", "side dish")
PETS = ("dog", "cat", "rabbit", "parrot", "puppy", "older cat")
PET_HABITS = ("barking at the door", "scratching the sofa", "waking me up at 5am", "refusing to eat dinner",
              "pulling on the lead", "hiding under the bed")
JOBS = ("data analyst", "nurse", "project manager", "backend engineer", "teacher", "product designer",
        "accountant", "sales lead", "research assistant", "customer support specialist")
RELATIONS = ("roommate", "manager", "neighbour", "brother", "best friend", "colleague", "landlord")
ISSUES = ("I can't make it to the wedding", "the music is too loud after midnight", "I need the money back",
          "I'd like to work from home two days a week", "the shared kitchen needs cleaning more often")
SITUATIONS = ("studying for exams", "training for a half marathon", "learning the piano as an adult",
              "working from home", "writing a thesis", "saving for a house")
HOBBIES = ("pottery", "rock climbing", "birdwatching", "sourdough baking", "chess", "watercolour painting",
           "sailing", "film photography", "woodworking", "salsa dancing")
BOOK_GENRES = ("science fiction", "historical fiction", "mystery", "popular science", "fantasy", "memoir")

LANGS = ("Python", "JavaScript", "TypeScript", "Go", "Rust", "Java", "C++", "Bash")
FENCE = {"Python": "python", "JavaScript": "javascript", "TypeScript": "typescript", "Go": "go",
         "Rust": "rust", "Java": "java", "C++": "cpp", "Bash": "bash"}
CODE_TASKS = (
    ("merge_intervals", "merges overlapping intervals given as a list of (start, end) pairs"),
    ("top_k_words", "returns the k most frequent words in a text, ignoring case and punctuation"),
    ("is_balanced", "checks whether a string of brackets ()[]{} is balanced"),
    ("lru_cache", "implements a fixed-size LRU cache with get and put in O(1)"),
    ("parse_duration", "parses strings like '1h30m' or '45s' into a number of seconds"),
    ("flatten", "flattens an arbitrarily nested list of integers"),
    ("rate_limiter", "implements a token-bucket rate limiter with a refill rate and a burst size"),
    ("group_anagrams", "groups a list of words into lists of anagrams"),
    ("retry", "retries a callable with exponential backoff and jitter, up to a maximum number of attempts"),
    ("chunked", "splits an iterable into chunks of n items, the last chunk possibly shorter"),
    ("dijkstra", "computes shortest path distances from a source node in a weighted graph"),
    ("slugify", "turns a title into a URL slug (lowercase, hyphens, ASCII only)"),
)
CODE_EXTRAS = ("Include type hints and a docstring.", "Add unit tests for the edge cases.",
               "Keep it under 40 lines.", "Explain the time complexity.", "Avoid external libraries.",
               "Handle invalid input by raising a clear error.")
BUGGY_PY = (
    ("def average(values):\n    total = 0\n    for v in values:\n        total += v\n    return total / len(values)\n",
     "ZeroDivisionError: division by zero"),
    ("def last_n(items, n):\n    return items[len(items) - n:]\n\nprint(last_n([1, 2, 3], 0))\n",
     "it prints the whole list instead of an empty one"),
    ("counts = {}\nfor word in text.split():\n    counts[word] += 1\n", "KeyError: 'the'"),
    ("def add_item(item, bucket=[]):\n    bucket.append(item)\n    return bucket\n",
     "the list keeps growing between calls"),
    ("import json\nwith open('config.json') as f:\n    config = json.load(f)\nport = config['port'] + 1\n",
     "TypeError: can only concatenate str (not \"int\") to str"),
    ("for i in range(len(rows)):\n    if rows[i] is None:\n        rows.remove(rows[i])\n",
     "IndexError: list index out of range"),
)
JS_SNIPPETS = (
    ("async function load(urls) {\n  const out = [];\n  urls.forEach(async (u) => {\n    const r = await fetch(u);\n"
     "    out.push(await r.json());\n  });\n  return out;\n}\n", "it always returns an empty array"),
    ("const total = items.reduce((sum, item) => { sum + item.price }, 0);\n", "total is undefined"),
    ("for (var i = 0; i < 3; i++) {\n  setTimeout(() => console.log(i), 100);\n}\n", "it logs 3 three times"),
)
SQL_TABLES = (("orders", "customer_id, order_date, total_amount"), ("employees", "id, name, department, salary"),
              ("page_views", "user_id, url, viewed_at"), ("invoices", "invoice_id, vendor, amount, due_date, paid"))
SQL_ASKS = ("the top 5 customers by total spend in 2025", "the average salary per department, highest first",
            "daily active users for the last 30 days", "all unpaid invoices that are more than 60 days overdue",
            "the month-over-month growth in order count")

FIRST_NAMES = ("Amira", "Jonas", "Priya", "Mateo", "Ingrid", "Kwame", "Sofia", "Hiroshi", "Lena", "Diego", "Noor",
               "Tomasz", "Aisha", "Felix", "Mei", "Oscar", "Zanele", "Rafael", "Elif", "Callum")
LAST_NAMES = ("Okafor", "Lindqvist", "Raman", "Alvarez", "Novak", "Mensah", "Rossi", "Tanaka", "Schmidt", "Costa",
              "Haddad", "Kowalski", "Bello", "Moreau", "Chen", "Byrne", "Dlamini", "Silva", "Yilmaz", "Fraser")
COMPANIES = ("Northwind Logistics", "Bluefin Analytics", "Harbor & Pine", "Quillstone Press", "Vertex Dental",
             "Copperleaf Energy", "Meridian Foods", "Lumen Robotics", "Greyfield Insurance", "Tidewater Labs")
TEAMS = ("platform", "billing", "mobile", "data engineering", "customer success", "security", "search", "payments")
PRODUCTS = ("the scheduling app", "the new checkout flow", "the reporting dashboard", "the partner API",
            "the mobile onboarding", "the inventory service", "the recommendation engine")

LANGUAGES = ("French", "German", "Spanish", "Italian", "Portuguese", "Dutch", "Japanese", "Polish", "Swedish")
EN_SENTENCES = (
    "The meeting has been moved to Thursday afternoon because the projector in the main room is broken.",
    "Please keep your receipt; you will need it if you want to exchange the shoes within thirty days.",
    "Our train was delayed by an hour, so we missed the first part of the concert.",
    "The museum is free on the first Sunday of every month, but it gets very crowded before noon.",
    "Could you water the tomatoes while I am away? They need a lot of water when it is hot.",
    "The new library opens at nine and has a quiet floor for people who want to study.",
    "I would like to book a table for four people at half past seven, near the window if possible.",
    "The software update fixes several bugs and makes the battery last noticeably longer.",
    "After the storm, volunteers spent the whole weekend clearing branches from the park paths.",
    "If you feel tired in the afternoon, a short walk outside often helps more than another coffee.",
    "The recipe calls for two cups of flour, a pinch of salt and three eggs at room temperature.",
    "We are looking for a reliable person to help at the front desk on Saturday mornings.",
)
FOREIGN_SENTENCES = (
    ("French", "Le magasin ferme à dix-neuf heures, mais la boulangerie d'à côté reste ouverte plus tard."),
    ("French", "Nous avons passé une semaine très agréable à la montagne, malgré la pluie du premier jour."),
    ("German", "Könnten Sie mir bitte sagen, wie ich am schnellsten zum Hauptbahnhof komme?"),
    ("German", "Die Besprechung wurde verschoben, weil zwei Kollegen heute krank sind."),
    ("Spanish", "El próximo autobús sale a las ocho y media desde la plaza principal."),
    ("Spanish", "Mi hermana está aprendiendo a tocar la guitarra y practica todas las tardes."),
    ("Italian", "Abbiamo prenotato una camera con vista sul lago per il fine settimana."),
    ("Portuguese", "A reunião de amanhã começa mais cedo, por isso não se atrase."),
    ("Dutch", "De fietsenmaker zegt dat mijn band vrijdag klaar is."),
)
TRANSLATION_STYLES = ("", " Keep the tone informal.", " Use a formal register.",
                      " Keep the meaning exact rather than literal.", " Return only the translation.")


def pick(rng: random.Random, seq):
    return seq[rng.randrange(len(seq))]


def person(rng: random.Random) -> str:
    return f"{pick(rng, FIRST_NAMES)} {pick(rng, LAST_NAMES)}"


# ----------------------------------------------------------------------------------------- prose blocks
def business_sentence(rng: random.Random) -> str:
    templates = (
        "{name} from the {team} team reported that {product} now handles about {n} requests per minute at peak.",
        "The group agreed to postpone the {product} launch by {w} weeks so that the {team} team can finish testing.",
        "{company} signed a {y}-year contract with a regional partner, which is expected to add roughly {p}% to "
        "revenue.",
        "Customer complaints about {product} dropped sharply after the {team} team fixed a long-standing timeout.",
        "{name} raised a concern that the budget for {product} does not cover the extra support staff.",
        "The {team} team will own the migration, with {name} as the main point of contact.",
        "Survey results showed that {p}% of users found {product} easier to use than the previous version.",
        "Hiring for two open roles in the {team} team is on hold until the next planning cycle.",
        "{name} suggested running a small pilot with three customers before a wider rollout of {product}.",
        "The quarterly review highlighted rising cloud costs, mostly caused by idle test environments.",
        "A short outage on {month} {d} was traced to an expired certificate on an internal load balancer.",
        "{company} plans to open a second office in {place} next year, starting with a team of {w} people.",
        "The legal team asked that all customer data exports be reviewed before they leave the company.",
        "Several people felt the weekly status meeting could be replaced by a written update.",
    )
    return pick(rng, templates).format(name=person(rng), team=pick(rng, TEAMS), product=pick(rng, PRODUCTS),
                                       company=pick(rng, COMPANIES), n=rng.randrange(200, 9000, 50),
                                       w=rng.randint(2, 9), y=rng.randint(2, 5), p=rng.randint(4, 38),
                                       month=pick(rng, MONTHS), d=rng.randint(1, 28), place=pick(rng, PLACES))


def science_sentence(rng: random.Random) -> str:
    templates = (
        "Researchers followed {n} volunteers for {y} years to see how sleep patterns changed with age.",
        "The study found that participants who walked daily reported better mood, although the effect was small.",
        "Soil samples from {k} sites suggested that the wetland stores more carbon than previously estimated.",
        "The authors caution that the sample was drawn from a single city and may not generalise.",
        "A follow-up experiment replaced the sugar solution with plain water and saw no change in behaviour.",
        "Bees in the warmer plots started foraging almost two weeks earlier in spring.",
        "The team measured river temperatures every hour using small sensors tied to the bank.",
        "Funding for the second phase will depend on whether the early results can be reproduced.",
        "Older trees in the survey area recovered more slowly after the drought than younger ones.",
        "The new battery chemistry kept {p}% of its capacity after one thousand charge cycles.",
    )
    return pick(rng, templates).format(n=rng.randrange(80, 4000, 10), y=rng.randint(2, 12),
                                       k=rng.randint(5, 40), p=rng.randint(70, 96))


def passage(rng: random.Random, sentences: int, kind: str = "business") -> str:
    make = business_sentence if kind == "business" else science_sentence
    out, paragraph = [], []
    for _ in range(sentences):
        paragraph.append(make(rng))
        if len(paragraph) >= rng.randint(3, 6):
            out.append(" ".join(paragraph))
            paragraph = []
    if paragraph:
        out.append(" ".join(paragraph))
    return "\n\n".join(out)


# --------------------------------------------------------------------------------------------- chat
def chat(rng: random.Random) -> list[dict]:
    asks = (
        lambda: f"I'm planning a {rng.randint(3, 14)}-day trip to {pick(rng, PLACES)} in {pick(rng, MONTHS)}. "
                "What should I pack, and are there any local customs I should know about?",
        lambda: f"Can you suggest a {pick(rng, MEALS)} that uses {pick(rng, INGREDIENTS)} and "
                f"{pick(rng, INGREDIENTS)}? I have about {rng.choice((20, 30, 45))} minutes.",
        lambda: f"My {pick(rng, PETS)} keeps {pick(rng, PET_HABITS)}. Any ideas on how to help?",
        lambda: f"What are some good ways to stay motivated when {pick(rng, SITUATIONS)}?",
        lambda: f"How do I politely tell my {pick(rng, RELATIONS)} that {pick(rng, ISSUES)}?",
        lambda: f"I have a job interview for a {pick(rng, JOBS)} position next week. "
                "What questions should I prepare for, and how should I answer them?",
        lambda: f"I'd like to get into {pick(rng, HOBBIES)}. Where should a complete beginner start?",
        lambda: f"Can you recommend a few {pick(rng, BOOK_GENRES)} books for someone who loved "
                f"{pick(rng, BOOK_GENRES)} as a teenager? Tell me briefly why each one.",
        lambda: "What's the difference between a "
                f"{pick(rng, ('Roth IRA', 'fixed-rate mortgage', 'index fund', 'credit union'))} and a "
                f"{pick(rng, ('traditional IRA', 'variable-rate mortgage', 'savings account', 'bank'))}, in "
                "plain words?",
        lambda: "I keep putting things off until the last minute. Is there a simple routine that actually works?",
        lambda: f"Write a short, warm message to congratulate my {pick(rng, RELATIONS)} on a new job.",
        lambda: "Why does bread go stale faster in the fridge? I always thought cold keeps food fresh.",
        lambda: f"Give me three ideas for a rainy weekend in {pick(rng, PLACES)} with two kids.",
    )
    messages = []
    if rng.random() < 0.4:
        messages.append({"role": "system", "content": pick(rng, SYSTEM_PROMPTS)})
    first = pick(rng, asks)()
    messages.append({"role": "user", "content": first})
    if rng.random() < 0.3:  # a second turn
        messages.append({"role": "assistant", "content": pick(rng, (
            "Sure! Here are a few suggestions to get you started. First, keep it simple and build a habit.",
            "Good question. The short answer is that it depends on your goals, but here is how I would think about it.",
            "Happy to help. A few things matter most here, and I will go through them one by one."))})
        messages.append({"role": "user", "content": pick(rng, (
            "Thanks! Could you make that shorter and more practical?", "Nice. What would you do first, honestly?",
            "That helps. What if I only have ten minutes a day?", "Great, can you put that in a checklist?"))})
    return messages


# --------------------------------------------------------------------------------------------- code
def code(rng: random.Random) -> list[dict]:
    kind = rng.random()
    if kind < 0.4:
        lang = pick(rng, LANGS)
        name, task = pick(rng, CODE_TASKS)
        text = f"Write a {lang} function `{name}` that {task}. {pick(rng, CODE_EXTRAS)}"
    elif kind < 0.65:
        snippet, error = pick(rng, BUGGY_PY)
        text = (f"Here is some Python code:\n\n```python\n{snippet}```\n\nWhen I run it, {error}. "
                "What's wrong, and how do I fix it?")
    elif kind < 0.8:
        snippet, error = pick(rng, JS_SNIPPETS)
        text = f"Why does this JavaScript not work? {error[0].upper() + error[1:]}.\n\n```javascript\n{snippet}```"
    else:
        table, columns = pick(rng, SQL_TABLES)
        text = (f"Write a SQL query over the table `{table}` ({columns}) that returns {pick(rng, SQL_ASKS)}. "
                "Use a CTE if it makes the query clearer.")
    messages = [{"role": "system", "content": "You are an expert programmer."}] if rng.random() < 0.3 else []
    return messages + [{"role": "user", "content": text}]


# -------------------------------------------------------------------------------------------- maths
def maths(rng: random.Random) -> list[dict]:
    a, b, c = rng.randint(2, 19), rng.randint(1, 60), rng.randint(61, 300)
    asks = (
        lambda: f"Solve for x: {a}x + {b} = {c}. Show each step.",
        lambda: f"What is the derivative of f(x) = {a}x^3 - {b}x^2 + {rng.randint(1, 9)}x - 7?",
        lambda: f"Evaluate the integral of ({a}x^2 + {rng.randint(1, 9)}) dx from 0 to {rng.randint(2, 6)}.",
        lambda: f"A train leaves at 08:{rng.randint(10, 59)} travelling at {rng.randrange(60, 180, 5)} km/h. "
                f"How long does it take to cover {rng.randrange(90, 600, 10)} km, and when does it arrive?",
        lambda: f"A shop sells {rng.randint(3, 40)} notebooks at ${rng.randint(2, 9)}.{rng.randint(10, 99)} each "
                f"with a {rng.choice((10, 15, 20, 25))}% discount on the total. What does the customer pay?",
        lambda: f"Two dice are rolled. What is the probability that the sum is {rng.randint(3, 11)}? "
                "Explain your reasoning.",
        lambda: "Prove that the sum of the first n odd numbers is n^2.",
        lambda: f"Find all integer solutions of x^2 - {a + b}x + {a * b} = 0.",
        lambda: f"If log_2(x) + log_2(x - {rng.randint(1, 6)}) = {rng.randint(3, 6)}, what is x?",
        lambda: f"A rectangle has a perimeter of {2 * (a + b)} cm and an area of {a * b} cm^2. "
                "What are its side lengths?",
        lambda: f"Compute {a * 37} * {b + 11} - {c} / 4 step by step.",
        lambda: f"An investment of ${rng.randrange(1000, 20000, 500)} grows at {rng.randint(2, 9)}% per year, "
                f"compounded annually. What is it worth after {rng.randint(3, 20)} years?",
        lambda: f"Simplify ({a}x^2 - {a * b}x) / ({a}x) and state for which x the simplification holds.",
        lambda: f"How many ways can a committee of {rng.randint(2, 5)} be chosen from {rng.randint(8, 15)} people?",
    )
    text = pick(rng, asks)()
    if rng.random() < 0.3:
        text = "Please work through this carefully. " + text
    return [{"role": "user", "content": text}]


# ------------------------------------------------------------------------------------- summarisation
def summarisation(rng: random.Random) -> list[dict]:
    kind = pick(rng, ("business", "science"))
    doc = pick(rng, ("meeting notes", "project update", "internal memo", "report")) if kind == "business" \
        else pick(rng, ("research summary", "article", "press release", "study abstract"))
    body = passage(rng, rng.randint(7, 20), kind)
    ask = pick(rng, (
        f"Summarise the following {doc} in {rng.randint(3, 6)} bullet points.",
        f"Write a one-paragraph summary of this {doc} for a busy executive.",
        f"Give me a TL;DR of the {doc} below, then list any decisions or open questions.",
        f"Summarize the key points of this {doc} in plain language.",
        f"Please condense the following {doc} into a short summary of at most {rng.randint(60, 120)} words.",
    ))
    if rng.random() < 0.5:
        return [{"role": "user", "content": f"{ask}\n\n{body}"}]
    return [{"role": "user", "content": f"{body}\n\n{ask}"}]


# ---------------------------------------------------------------------------------------- extraction
def extraction(rng: random.Random) -> list[dict]:
    name, company = person(rng), pick(rng, COMPANIES)
    kind = rng.randrange(4)
    if kind == 0:
        doc = (f"Hi team,\n\nThis is {name} from {company}. Our invoice INV-{rng.randint(10000, 99999)} for "
               f"${rng.randint(200, 9000)}.{rng.randint(10, 99)} was due on {pick(rng, MONTHS)} {rng.randint(1, 28)}, "
               f"but we have not received payment yet. Could you confirm the status? You can reach me at "
               f"{name.split()[0].lower()}@example.com.\n\nThanks,\n{name}")
        keys = '"sender_name", "company", "invoice_number", "amount", "due_date", "email"'
        text = f"Extract the details from this email and return a JSON object with the keys {keys}.\n\n{doc}"
    elif kind == 1:
        doc = (f"{company} is hiring a {pick(rng, JOBS)} in {pick(rng, PLACES)}. The role is "
               f"{pick(rng, ('full-time', 'part-time', 'a 12-month contract'))}, with a salary range of "
               f"{rng.randint(40, 80)}k to {rng.randint(81, 140)}k. Applicants need at least "
               f"{rng.randint(1, 7)} years of experience. Apply before {pick(rng, MONTHS)} {rng.randint(1, 28)}.")
        schema = ('{"company": string, "title": string, "location": string, "employment_type": string, '
                  '"salary_min": number, "salary_max": number, "years_experience": number, "deadline": string}')
        text = f"Return only JSON matching this schema: {schema}\n\nJob posting:\n{doc}"
    elif kind == 2:
        items = [(pick(rng, INGREDIENTS), rng.randint(1, 6), rng.randint(1, 15)) for _ in range(rng.randint(2, 5))]
        lines = "\n".join(f"- {q} x {item} at ${p}.{rng.randint(0, 99):02d}" for item, q, p in items)
        doc = f"Order from {name}, delivered to {rng.randint(1, 300)} {pick(rng, LAST_NAMES)} Street:\n{lines}"
        text = ("Convert this order into JSON: an object with \"customer\", \"address\" and an \"items\" array "
                f"whose entries have \"name\", \"quantity\" and \"unit_price\". No commentary.\n\n{doc}")
    else:
        people = [(person(rng), pick(rng, JOBS), pick(rng, TEAMS)) for _ in range(rng.randint(3, 6))]
        doc = " ".join(f"{p} joined as {j} in the {t} team." for p, j, t in people)
        text = ("List every person mentioned below as a JSON array of objects with the fields "
                f"\"name\", \"role\" and \"team\".\n\n{doc}")
    return [{"role": "user", "content": text}]


# --------------------------------------------------------------------------------------- translation
def translation(rng: random.Random) -> list[dict]:
    if rng.random() < 0.6:
        target = pick(rng, LANGUAGES)
        count = rng.randint(1, 3)
        source = " ".join(rng.sample(EN_SENTENCES, count))
        text = f"Translate the following text into {target}.{pick(rng, TRANSLATION_STYLES)}\n\n{source}"
    elif rng.random() < 0.75:
        lang, source = pick(rng, FOREIGN_SENTENCES)
        text = f"Translate this {lang} sentence into English: \"{source}\""
    else:
        phrase = pick(rng, ("Where is the nearest pharmacy?", "I'm allergic to peanuts.",
                            "Could we get the bill, please?", "How much does a ticket to the city centre cost?",
                            "Nice to meet you."))
        text = f"How do you say \"{phrase}\" in {pick(rng, LANGUAGES)}? Please translate it and add the pronunciation."
    return [{"role": "user", "content": text}]


# -------------------------------------------------------------------------------------- long-context
def long_context(rng: random.Random) -> list[dict]:
    title = pick(rng, ("Quarterly operations log", "Engineering handbook (excerpt)", "Incident review archive",
                       "Board meeting minutes", "Field study notes"))
    sections = []
    for number in range(1, rng.randint(9, 14) + 1):
        kind = "science" if title == "Field study notes" else "business"
        sections.append(f"## Section {number}\n\n{passage(rng, rng.randint(10, 16), kind)}")
    question = pick(rng, (
        "Based only on the document above, which team owns the migration, and who is the point of contact?",
        "Using the document above, list every outage that is mentioned and its cause.",
        "According to the document, what were the main risks raised, and were any of them resolved?",
        "Which sections of the document above discuss costs? Quote the relevant sentences.",
        "Answer from the document above: what did the researchers caution about their results?",
    ))
    return [{"role": "user", "content": f"# {title}\n\n" + "\n\n".join(sections) + f"\n\n{question}"}]


BUILDERS = {"chat": chat, "code": code, "maths": maths, "summarisation": summarisation, "extraction": extraction,
            "translation": translation, "long-context": long_context}


def build() -> list[dict]:
    rng = random.Random(SEED)
    records = []
    for category, count in PER_CATEGORY.items():
        seen: set[str] = set()
        while len([r for r in records if r["category"] == category]) < count:
            messages = BUILDERS[category](rng)
            key = json.dumps(messages)
            if key in seen:
                continue
            seen.add(key)
            low, high = OUTPUT_TOKENS[category]
            output_tokens = rng.randint(low, high)
            records.append({"id": f"{category}-{len(seen):03d}", "category": category, "messages": messages,
                            "output_tokens": output_tokens, "max_tokens": 2 * output_tokens})
    return records


def render(records: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the data file is out of date")
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        if not OUT.is_file() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is out of date: run python tools/gen_prompt_suite.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {len(text.splitlines())} prompts to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
