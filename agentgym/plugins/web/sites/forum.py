"""A small discussion forum in the spirit of WebArena's Reddit-like site (Postmill).

Forums with subscribers and moderators, posts with votes and threaded comments, user
profiles with karma, settings, private messages, search, and moderation (lock and remove
posts). Pages are plain server-rendered HTML with labelled form controls and unique
accessible names where a task has to target them ("Upvote post", "Post comment",
"Upvote comment by bob", "Subscribe to cooking").

The seed is fixed: 12 users (``alice``/``alice-pass`` and so on; ``carol`` moderates books,
cooking and gardening, ``frank`` programming, travel and movies), 6 forums, 43 posts,
about 100 comments, votes and a few private messages, all dated 2025.
"""

from __future__ import annotations

import datetime
import random
import sqlite3
import urllib.parse
from collections.abc import Iterable

from starlette.responses import Response

from agentgym.plugins.web.sites.site import Site, redirect
from agentgym.plugins.web.sites.site import SiteRequest as Request

#: The site's clock for "hot" ranking: seeded content is ranked as of this moment.
NOW = datetime.datetime(2025, 11, 15, 12, 0)
PAGE_SIZE = 20
TIME_ZONES = ("UTC", "America/New_York", "America/Chicago", "America/Los_Angeles",
              "Europe/London", "Europe/Lisbon", "Europe/Berlin", "Asia/Kolkata", "Asia/Tokyo",
              "Australia/Sydney")
SORTS = (("hot", "Hot"), ("new", "New"), ("top", "Top"))

SCHEMA = """
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    username TEXT NOT NULL UNIQUE,
    password TEXT NOT NULL,
    email TEXT NOT NULL DEFAULT '',
    bio TEXT NOT NULL DEFAULT '',
    joined TEXT NOT NULL,
    is_moderator INTEGER NOT NULL DEFAULT 0,
    email_replies INTEGER NOT NULL DEFAULT 1,
    timezone TEXT NOT NULL DEFAULT 'UTC'
);
CREATE TABLE forums (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    description TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE forum_moderators (
    forum_id INTEGER NOT NULL REFERENCES forums(id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    PRIMARY KEY (forum_id, user_id)
);
CREATE TABLE subscriptions (
    user_id INTEGER NOT NULL REFERENCES users(id),
    forum_id INTEGER NOT NULL REFERENCES forums(id),
    PRIMARY KEY (user_id, forum_id)
);
CREATE TABLE posts (
    id INTEGER PRIMARY KEY,
    forum_id INTEGER NOT NULL REFERENCES forums(id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    title TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '',
    created TEXT NOT NULL,
    edited TEXT,
    locked INTEGER NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE comments (
    id INTEGER PRIMARY KEY,
    post_id INTEGER NOT NULL REFERENCES posts(id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    parent_id INTEGER REFERENCES comments(id),
    body TEXT NOT NULL,
    created TEXT NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE post_votes (
    user_id INTEGER NOT NULL REFERENCES users(id),
    post_id INTEGER NOT NULL REFERENCES posts(id),
    value INTEGER NOT NULL CHECK (value IN (-1, 1)),
    PRIMARY KEY (user_id, post_id)
);
CREATE TABLE comment_votes (
    user_id INTEGER NOT NULL REFERENCES users(id),
    comment_id INTEGER NOT NULL REFERENCES comments(id),
    value INTEGER NOT NULL CHECK (value IN (-1, 1)),
    PRIMARY KEY (user_id, comment_id)
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    sender_id INTEGER NOT NULL REFERENCES users(id),
    recipient_id INTEGER NOT NULL REFERENCES users(id),
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    sent TEXT NOT NULL,
    read INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE mod_log (
    id INTEGER PRIMARY KEY,
    moderator_id INTEGER NOT NULL REFERENCES users(id),
    post_id INTEGER NOT NULL,
    action TEXT NOT NULL,
    created TEXT NOT NULL
);
"""

# ---- seed data --------------------------------------------------------------------------

# username, email, bio, joined, email_replies, timezone
USERS = [
    ("alice", "alice@example.com", "Weekend baker and science fiction reader.", "2023-02-11",
     1, "UTC"),
    ("bob", "bob@example.com", "Backend developer. Rust, Go, and too much coffee.",
     "2022-11-03", 1, "Europe/Berlin"),
    ("carol", "carol@example.com", "Moderator of books, cooking and gardening. Be kind.",
     "2022-06-20", 1, "America/Chicago"),
    ("dave", "dave@example.com", "Hiker and amateur photographer.", "2023-08-30", 0,
     "America/Los_Angeles"),
    ("erin", "erin@example.com", "Growing tomatoes on a tiny balcony.", "2024-01-15", 1,
     "Europe/London"),
    ("frank", "frank@example.com", "Film buff and Python person. I moderate programming, "
     "travel and movies.", "2022-09-09", 1, "America/New_York"),
    ("grace", "grace@example.com", "Traveling slowly through Europe by train.", "2024-03-22",
     1, "Europe/Lisbon"),
    ("heidi", "heidi@example.com", "Cook, baker and occasional food writer.", "2023-05-17", 0,
     "America/New_York"),
    ("ivan", "ivan@example.com", "Systems programmer. Ask me about linkers.", "2024-06-01", 1,
     "Europe/Berlin"),
    ("judy", "judy@example.com", "Librarian. Always reading three books at once.",
     "2023-12-05", 1, "Australia/Sydney"),
    ("mallory", "mallory@example.com", "", "2025-01-20", 0, "UTC"),
    ("oscar", "oscar@example.com", "Retired gardener with opinions about compost.",
     "2022-04-02", 1, "Europe/London"),
]
MODERATORS = {"carol": ("books", "cooking", "gardening"),
              "frank": ("programming", "travel", "movies")}

# name, title, description, created
FORUMS = [
    ("books", "Books", "Reading recommendations, reviews and book club threads.",
     "2022-04-10"),
    ("cooking", "Cooking", "Recipes, techniques and kitchen disasters. Share what you made!",
     "2022-04-10"),
    ("programming", "Programming", "Questions and discussion about writing software. "
     "Include code and error messages.", "2022-05-02"),
    ("travel", "Travel", "Trip reports, itineraries and advice for getting around.",
     "2022-06-18"),
    ("gardening", "Gardening", "Vegetables, houseplants, compost and everything green.",
     "2022-07-01"),
    ("movies", "Movies", "Film discussion, reviews and recommendations. Mark your spoilers.",
     "2022-09-12"),
]

SUBSCRIPTIONS = {
    "alice": ("books", "cooking", "movies"),
    "bob": ("programming", "cooking", "travel"),
    "carol": ("books", "cooking", "gardening"),
    "dave": ("travel", "movies", "books", "cooking"),
    "erin": ("gardening", "cooking"),
    "frank": ("programming", "movies", "travel"),
    "grace": ("travel", "books", "cooking"),
    "heidi": ("cooking", "travel", "gardening"),
    "ivan": ("programming", "movies", "books"),
    "judy": ("books", "gardening", "movies", "programming"),
    "oscar": ("gardening", "books"),
}

# key, forum, author, created, title, body, upvotes, downvotes (from other users)
POSTS = [
    ("jan_reading", "books", "judy", "2025-01-08 09:15", "What are you reading in January?",
     "Monthly thread. I'm halfway through The Left Hand of Darkness and loving the long "
     "journey across the ice.", 6, 0),
    ("cozy", "books", "alice", "2025-02-03 20:40", "Looking for cozy mysteries set in small "
     "towns", "I just finished the Thursday Murder Club books. What should I read next? "
     "Bonus points for a village and a bakery.", 4, 0),
    ("moby", "books", "dave", "2025-03-12 18:05", "Is Moby-Dick worth finishing?",
     "I'm 300 pages in and the whale anatomy chapters are testing me. Does it pay off?", 5,
     1),
    ("remains", "books", "carol", "2025-04-01 08:00", "Book club: The Remains of the Day "
     "discussion", "Our April pick. Discuss the ending here; spoilers are allowed in this "
     "thread.", 7, 0),
    ("train_books", "books", "grace", "2025-05-19 14:22", "Best books to read on long train "
     "rides", "Taking the train from Lisbon to Vienna next month. I want something long and "
     "absorbing.", 3, 0),
    ("library_haul", "books", "judy", "2025-06-30 11:11", "Library sale haul: 14 books for 9 "
     "dollars", "Found a first paperback printing of Dune in the box of free books.", 8, 1),
    ("tech_novels", "books", "ivan", "2025-08-14 22:47", "Technical books that read like "
     "novels", "Code by Charles Petzold is my favourite example. What else belongs in that "
     "category?", 5, 0),
    ("starter", "cooking", "heidi", "2025-01-12 10:30", "My sourdough starter finally doubled",
     "Day nine and it finally doubles in six hours. The secret was switching to rye flour "
     "for the feeds.", 8, 0),
    ("pale_crust", "cooking", "alice", "2025-02-18 19:02", "Sourdough crust too pale, what am "
     "I doing wrong?", "Baking at 230 C in a Dutch oven, lid off after 20 minutes, but the "
     "crust stays blond.", 3, 0),
    ("ramen", "cooking", "bob", "2025-03-07 12:45", "Weeknight ramen in 25 minutes",
     "Store-bought noodles, a jammy egg and a miso-tahini broth. Recipe in the comments.", 7,
     1),
    ("cast_iron", "cooking", "heidi", "2025-04-22 16:10", "How to season a cast iron skillet "
     "properly", "Thin layers of flaxseed oil are overrated. Here is the routine I have used "
     "for ten years.", 7, 0),
    ("camp_breakfast", "cooking", "dave", "2025-06-05 07:55", "Camping breakfast ideas that "
     "are not oatmeal", "Going on a four-day trek: light, no fridge, one pot. I was thinking "
     "of sourdough pancakes but that is a lot of gear.", 2, 0),
    ("tomatoes", "cooking", "erin", "2025-07-27 13:30", "What to do with 5 kg of tomatoes",
     "The balcony garden overdelivered. Sauce, salsa, or something I have not thought of?",
     5, 0),
    ("nata", "cooking", "grace", "2025-09-09 18:20", "The best pastel de nata in Lisbon is not "
     "at Belem", "A controversial opinion after trying eleven bakeries. A home recipe is at "
     "the end.", 6, 2),
    ("rust", "programming", "bob", "2025-01-20 09:00", "Fighting the Rust borrow checker with "
     "shared state", "I have a struct shared across threads and the borrow checker rejects "
     "every version. Arc<Mutex<T>> everywhere feels wrong.", 6, 0),
    ("linker", "programming", "ivan", "2025-02-11 21:30", "Why is my linker so slow on a large "
     "C++ project?", "Linking takes four minutes on every change. Is switching to mold worth "
     "it?", 5, 0),
    ("free_threading", "programming", "frank", "2025-03-25 10:10", "Python 3.13 "
     "free-threading: has anyone tried it?", "Curious about real-world speedups on CPU-bound "
     "code without the GIL.", 8, 0),
    ("tracker", "programming", "alice", "2025-04-30 15:45", "First Python project: a "
     "sourdough feeding tracker", "I built a tiny Flask app that reminds me when to feed the "
     "starter. Feedback welcome!", 4, 0),
    ("sql", "programming", "dave", "2025-06-12 08:30", "SQL question: counting rows per group "
     "with a filter", "I need per-forum counts of posts with a score above 5. GROUP BY with "
     "HAVING, or a subquery?", 2, 0),
    ("tabs", "programming", "bob", "2025-07-18 17:05", "Tabs vs spaces, 2025 edition",
     "Just kidding. But which formatter does your team use?", 5, 3),
    ("segfault", "programming", "ivan", "2025-09-02 19:40", "Debugging a segfault that only "
     "happens in release builds", "Works with -O0, crashes with -O2. Valgrind is clean. "
     "Where do I start?", 6, 0),
    ("isbn", "programming", "judy", "2025-10-21 12:00", "Scripts for cataloguing a home "
     "library", "Looking for a way to scan ISBN barcodes and build a spreadsheet of my "
     "shelves.", 3, 0),
    ("portugal", "travel", "grace", "2025-01-30 07:20", "Two weeks in Portugal by train: my "
     "itinerary", "Lisbon, Sintra, Coimbra, Porto and the Douro valley. The full day-by-day "
     "plan:\n\nDays 1-4: Lisbon, with a day trip to Sintra.\nDays 5-6: Coimbra.\n"
     "Days 7-9: Porto.\nDay 10: the Douro valley line to Pinhao and back.\nDays 11-14: "
     "back to Lisbon, and the coast at Cascais.", 9, 0),
    ("tmb", "travel", "dave", "2025-03-03 16:00", "Hiking the Tour du Mont Blanc in "
     "September", "Booked the refuges. Has anyone done it counter-clockwise?", 4, 0),
    ("jr_pass", "travel", "alice", "2025-04-14 09:05", "Is a rail pass worth it for Japan in "
     "2025?", "After the price increase I am not sure the JR Pass pays off for a ten-day "
     "trip.", 5, 0),
    ("nz_films", "travel", "frank", "2025-05-28 20:15", "Film locations worth visiting in New "
     "Zealand", "Beyond Hobbiton: places from movies that you can actually reach by car.", 6,
     0),
    ("carry_on", "travel", "grace", "2025-07-06 11:50", "Packing list for a carry-on only "
     "month", "Seven kilograms, four climates. Here is what made the cut.", 7, 0),
    ("markets", "travel", "heidi", "2025-08-25 13:35", "Food markets you should not miss in "
     "Mexico City", "Mercado de la Merced for everything, San Juan for the adventurous.", 3,
     0),
    ("lisbon_wifi", "travel", "bob", "2025-10-10 06:40", "Working remotely from Lisbon: cafes "
     "with good wifi", "Three weeks in, here are the places where I could actually take "
     "calls.", 4, 1),
    ("compost", "gardening", "oscar", "2025-02-01 08:00", "Compost too wet and smelly, help",
     "It smells like ammonia. More browns? Turn it more often?", 5, 0),
    ("seeds", "gardening", "erin", "2025-03-15 17:25", "Starting tomato seeds on a windowsill",
     "Twelve varieties this year. The seedlings are getting leggy already.", 3, 0),
    ("fig", "gardening", "judy", "2025-04-09 10:00", "Repotting a fiddle leaf fig without "
     "killing it", "It has outgrown its pot but it drops leaves whenever I move it. Any "
     "advice before I try?", 6, 0),
    ("no_dig", "gardening", "oscar", "2025-05-03 07:45", "Why I stopped tilling my vegetable "
     "beds", "No-dig for three years now, and the soil has never been better.", 8, 0),
    ("aphids", "gardening", "erin", "2025-06-21 19:10", "Aphids on my peppers, organic "
     "options?", "Soap spray helped a little. Should I buy ladybugs?", 4, 0),
    ("spam", "gardening", "mallory", "2025-07-15 02:30", "Buy cheap garden followers now!!!",
     "Best prices on followers and likes for your garden page. Visit our site today.", 0, 6),
    ("herbs", "gardening", "heidi", "2025-09-18 15:00", "Herbs that survive a shady kitchen "
     "windowsill", "Mint and parsley are fine. Basil sulks.", 2, 0),
    ("scifi", "movies", "frank", "2025-01-25 21:00", "Underrated science fiction films of the "
     "1970s", "Silent Running, Dark Star, Phase IV. What else?", 7, 0),
    ("better_book", "movies", "alice", "2025-03-20 22:10", "Movies that are better than the "
     "book", "I will start: The Remains of the Day. Fight me.", 5, 2),
    ("matrix", "movies", "ivan", "2025-05-10 23:30", "Rewatching The Matrix 26 years later",
     "The hacking scenes aged badly. Everything else did not.", 6, 0),
    ("mountain", "movies", "dave", "2025-07-04 20:00", "Best mountain films for a rainy "
     "weekend", "Free Solo, Touching the Void, and The Eiger Sanction for fun.", 3, 0),
    ("library_docs", "movies", "judy", "2025-08-30 18:45", "Documentaries about libraries and "
     "archives", "Ex Libris is three hours long and worth every minute.", 4, 0),
    ("weekly", "movies", "frank", "2025-11-02 19:30", "Weekly discussion: what did you watch "
     "this week?", "Post your watches; one-sentence reviews encouraged.", 2, 0),
    ("rewatch", "movies", "erin", "2025-11-10 09:05", "Comfort movies you rewatch every "
     "winter", "Mine is Paddington 2, every December without fail.", 1, 0),
]

#: alice's own votes (the seed's other votes come from the other users).
ALICE_POST_VOTES = {"starter": 1, "cast_iron": 1, "rust": 1, "portugal": 1, "tabs": -1}

# key, post, author, created, body, upvotes, downvotes, parent comment key
COMMENTS = [
    ("jr1", "jan_reading", "alice", "2025-01-08 12:00", "The Left Hand of Darkness is one of "
     "my favourites. I'm reading Piranesi right now.", 3, 0, None),
    ("jr2", "jan_reading", "dave", "2025-01-09 08:30", "Started The Overstory. Slow but "
     "beautiful.", 2, 0, None),
    ("jr3", "jan_reading", "judy", "2025-01-09 10:00", "Piranesi is wonderful, take your "
     "time with it.", 1, 0, "jr1"),
    ("cz1", "cozy", "judy", "2025-02-03 21:10", "Try the Flavia de Luce series: a village, "
     "chemistry, and an eleven-year-old detective.", 6, 0, None),
    ("cz2", "cozy", "carol", "2025-02-04 07:45", "The Aunt Dimity books have a village and a "
     "lot of tea.", 2, 0, None),
    ("cz3", "cozy", "heidi", "2025-02-04 09:00", "Not a village, but The No. 1 Ladies' "
     "Detective Agency is the coziest thing I know.", 3, 1, None),
    ("cz4", "cozy", "alice", "2025-02-04 18:30", "Ordered the first Flavia book, thank you!",
     1, 0, "cz1"),
    ("md1", "moby", "bob", "2025-03-12 19:00", "Skip the whale chapters, nobody will know.",
     1, 3, None),
    ("md2", "moby", "oscar", "2025-03-12 20:15", "It pays off. The last hundred pages are "
     "some of the best prose in English. Keep going.", 8, 0, None),
    ("md3", "moby", "judy", "2025-03-13 09:00", "Try the audiobook for the whale chapters.",
     4, 0, None),
    ("md4", "moby", "mallory", "2025-03-13 23:50", "Boring book, boring thread.", 0, 5,
     None),
    ("md5", "moby", "dave", "2025-03-14 07:00", "Okay, you convinced me. Back to the "
     "Pequod.", 2, 0, "md2"),
    ("rd1", "remains", "judy", "2025-04-02 10:20", "The last conversation on the pier broke "
     "me.", 5, 0, None),
    ("rd2", "remains", "alice", "2025-04-02 21:05", "I did not expect to cry at a book about a "
     "butler.", 3, 0, None),
    ("rd3", "remains", "frank", "2025-04-03 19:40", "The film with Anthony Hopkins is just as "
     "good.", 2, 1, None),
    ("tb1", "train_books", "judy", "2025-05-19 15:00", "Wolf Hall. Long, absorbing, and "
     "perfect for looking out of the window.", 4, 0, None),
    ("tb2", "train_books", "alice", "2025-05-19 18:10", "Anything by Ursula K. Le Guin.", 1,
     0, None),
    ("tb3", "train_books", "ivan", "2025-05-20 08:25", "The Count of Monte Cristo, "
     "unabridged.", 5, 0, None),
    ("lh1", "library_haul", "carol", "2025-06-30 12:30", "A free first printing of Dune! "
     "Lucky.", 3, 0, None),
    ("lh2", "library_haul", "bob", "2025-06-30 19:45", "Library sales are dangerous for my "
     "shelves.", 2, 0, None),
    ("tn1", "tech_novels", "bob", "2025-08-15 07:10", "The Soul of a New Machine by Tracy "
     "Kidder.", 6, 0, None),
    ("tn2", "tech_novels", "frank", "2025-08-15 12:00", "Masters of Doom.", 3, 0, None),
    ("tn3", "tech_novels", "ivan", "2025-08-15 21:30", "Added to the list, thanks.", 1, 0,
     "tn1"),
    ("st1", "starter", "alice", "2025-01-12 11:15", "Congrats! How much rye do you use per "
     "feed?", 2, 0, None),
    ("st2", "starter", "heidi", "2025-01-12 13:00", "About 20 percent rye, the rest bread "
     "flour.", 3, 0, "st1"),
    ("st3", "starter", "erin", "2025-01-13 09:40", "Mine smells like nail polish remover. Is "
     "that bad?", 1, 0, None),
    ("st4", "starter", "heidi", "2025-01-13 10:05", "It is hungry. Feed it more often.", 2, 0,
     "st3"),
    ("pc1", "pale_crust", "heidi", "2025-02-18 20:00", "Bake longer with the lid off, at "
     "least 20 more minutes, until it is deep brown.", 7, 0, None),
    ("pc2", "pale_crust", "bob", "2025-02-18 21:30", "Is your oven thermometer accurate? Mine "
     "was off by 25 degrees.", 3, 0, None),
    ("pc3", "pale_crust", "carol", "2025-02-19 08:15", "A little sugar or malt in the dough "
     "helps with colour.", 2, 1, None),
    ("rm1", "ramen", "bob", "2025-03-07 12:50", "Broth: 2 tbsp miso and 1 tbsp tahini per "
     "500 ml stock, plus garlic and chili oil.", 4, 0, None),
    ("rm2", "ramen", "alice", "2025-03-08 20:30", "Made this last night. Excellent.", 2, 0,
     None),
    ("rm3", "ramen", "heidi", "2025-03-09 11:00", "Add a splash of soy milk for a creamier "
     "broth.", 3, 0, None),
    ("rm4", "ramen", "grace", "2025-03-10 17:45", "Any vegetarian swap for the stock?", 1, 0,
     None),
    ("rm5", "ramen", "bob", "2025-03-10 18:20", "Kombu and dried shiitake work great.", 2, 0,
     "rm4"),
    ("ci1", "cast_iron", "oscar", "2025-04-22 18:00", "My grandmother never seasoned hers. "
     "She just cooked bacon in it for forty years.", 5, 0, None),
    ("ci2", "cast_iron", "dave", "2025-04-23 07:30", "Finally a routine that does not "
     "involve six hours in the oven.", 1, 0, None),
    ("cb1", "camp_breakfast", "grace", "2025-06-05 09:00", "Couscous with dried fruit and "
     "nuts. Just add boiling water.", 3, 0, None),
    ("cb2", "camp_breakfast", "heidi", "2025-06-05 12:40", "Tortillas with peanut butter and "
     "honey survive anything.", 4, 0, None),
    ("to1", "tomatoes", "heidi", "2025-07-27 15:00", "Roast them all with garlic and freeze "
     "them in portions.", 5, 0, None),
    ("to2", "tomatoes", "oscar", "2025-07-27 18:30", "Green tomato chutney for the unripe "
     "ones.", 2, 0, None),
    ("to3", "tomatoes", "carol", "2025-07-28 08:10", "Passata! Jar it and thank yourself in "
     "January.", 3, 0, None),
    ("pn1", "nata", "bob", "2025-09-09 19:00", "Manteigaria in Chiado, right?", 2, 0, None),
    ("pn2", "nata", "grace", "2025-09-09 19:30", "You know it.", 1, 0, "pn1"),
    ("ru1", "rust", "ivan", "2025-01-20 10:15", "Arc<Mutex<T>> is fine. Or restructure so one "
     "thread owns the state and the others send it messages.", 6, 0, None),
    ("ru2", "rust", "frank", "2025-01-20 11:00", "Post the error message; the compiler "
     "usually tells you what it wants.", 2, 0, None),
    ("ru3", "rust", "bob", "2025-01-21 09:30", "Message passing worked, thank you.", 1, 0,
     "ru1"),
    ("li1", "linker", "bob", "2025-02-11 22:10", "Mold cut our link time from three minutes "
     "to twelve seconds.", 5, 0, None),
    ("li2", "linker", "frank", "2025-02-12 09:00", "Also check that you are not linking debug "
     "info you do not need.", 2, 0, None),
    ("ft1", "free_threading", "ivan", "2025-03-25 12:00", "About 3x on a CPU-bound benchmark "
     "with 4 threads. C extensions are the catch.", 4, 0, None),
    ("ft2", "free_threading", "bob", "2025-03-26 08:45", "Waiting for the ecosystem to catch "
     "up.", 1, 0, None),
    ("tr1", "tracker", "frank", "2025-04-30 17:00", "Nice! Consider SQLite instead of a JSON "
     "file.", 3, 0, None),
    ("tr2", "tracker", "heidi", "2025-05-01 08:20", "I would use this. Can it remind me by "
     "email?", 2, 0, None),
    ("tr3", "tracker", "mallory", "2025-05-01 03:00", "Buy cheap hosting at our site!!!", 0,
     4, None),
    ("sq1", "sql", "ivan", "2025-06-12 09:15", "HAVING filters groups; you want WHERE score > "
     "5 and then GROUP BY forum.", 5, 0, None),
    ("sq2", "sql", "frank", "2025-06-12 10:30", "Use COUNT(*) FILTER (WHERE ...) if your "
     "database supports it.", 3, 0, None),
    ("ts1", "tabs", "frank", "2025-07-18 18:00", "Black and ruff for Python. No arguments "
     "since.", 4, 0, None),
    ("ts2", "tabs", "ivan", "2025-07-18 19:20", "clang-format with the team's config in the "
     "repository.", 2, 0, None),
    ("ts3", "tabs", "mallory", "2025-07-19 02:00", "Tabs. Obviously.", 0, 2, None),
    ("sf1", "segfault", "bob", "2025-09-02 20:30", "Undefined behavior. Try "
     "-fsanitize=address,undefined.", 6, 0, None),
    ("sf2", "segfault", "frank", "2025-09-03 08:00", "An uninitialized variable is my first "
     "guess.", 3, 0, None),
    ("is1", "isbn", "frank", "2025-10-21 14:10", "The Open Library API takes an ISBN and "
     "returns JSON.", 4, 0, None),
    ("pt1", "portugal", "dave", "2025-01-30 09:00", "How many days in Porto?", 1, 0, None),
    ("pt2", "portugal", "grace", "2025-01-30 10:15", "Three, plus a day trip to the Douro.", 2,
     0, "pt1"),
    ("pt3", "portugal", "bob", "2025-01-30 13:40", "Book the Sintra palace tickets ahead; the "
     "lines are long.", 4, 0, None),
    ("pt4", "portugal", "dave", "2025-01-31 08:05", "Did you need reservations on the "
     "regional trains?", 1, 0, None),
    ("pt5", "portugal", "alice", "2025-02-01 19:00", "Saving this for next spring.", 1, 0,
     None),
    ("pt6", "portugal", "dave", "2025-02-02 11:30", "The Douro valley line is gorgeous. Sit on "
     "the left side.", 5, 0, None),
    ("tm1", "tmb", "grace", "2025-03-03 18:00", "Counter-clockwise is the classic direction; "
     "the other way has fewer crowds.", 2, 0, None),
    ("tm2", "tmb", "frank", "2025-03-04 07:15", "Bring cash for the refuges in Italy.", 3, 0,
     None),
    ("jp1", "jr_pass", "ivan", "2025-04-14 10:30", "For Tokyo, Kyoto, Osaka and back, single "
     "tickets are cheaper now.", 6, 0, None),
    ("jp2", "jr_pass", "grace", "2025-04-14 12:00", "Look at the regional passes instead.", 3,
     0, None),
    ("nz1", "nz_films", "dave", "2025-05-29 06:45", "Mount Sunday (Edoras) is a beautiful "
     "drive.", 3, 0, None),
    ("co1", "carry_on", "alice", "2025-07-06 13:00", "Merino everything?", 2, 0, None),
    ("co2", "carry_on", "grace", "2025-07-06 13:20", "Merino everything.", 3, 0, "co1"),
    ("mk1", "markets", "grace", "2025-08-25 16:00", "Mercado de Coyoacan for tostadas!", 2, 0,
     None),
    ("lw1", "lisbon_wifi", "grace", "2025-10-10 09:30", "Try the cafe next to the Jardim da "
     "Estrela.", 1, 0, None),
    ("cp1", "compost", "erin", "2025-02-01 09:30", "More cardboard, and turn it weekly.", 4,
     0, None),
    ("cp2", "compost", "carol", "2025-02-01 12:00", "Ammonia means too much nitrogen. Add "
     "browns.", 5, 0, None),
    ("se1", "seeds", "oscar", "2025-03-15 19:00", "Use a heat mat, then move them to the "
     "brightest window.", 3, 0, None),
    ("fg1", "fig", "carol", "2025-04-09 11:30", "Go only one pot size up and do not water it "
     "for a week.", 4, 0, None),
    ("fg2", "fig", "erin", "2025-04-09 14:45", "Mine dropped three leaves after repotting and "
     "recovered.", 2, 0, None),
    ("nd1", "no_dig", "erin", "2025-05-03 09:00", "Convinced. Trying it this autumn.", 2, 0,
     None),
    ("nd2", "no_dig", "carol", "2025-05-03 12:10", "Great write-up.", 1, 0, None),
    ("ap1", "aphids", "oscar", "2025-06-21 20:00", "Blast them with water every morning for a "
     "week.", 3, 0, None),
    ("ap2", "aphids", "carol", "2025-06-22 08:30", "Ladybug larvae work better than adults; "
     "they stay.", 4, 0, None),
    ("hb1", "herbs", "erin", "2025-09-18 17:00", "Chives do fine in shade too.", 2, 0, None),
    ("sc1", "scifi", "ivan", "2025-01-25 22:10", "Solaris (1972). Slow, but unforgettable.",
     5, 0, None),
    ("sc2", "scifi", "dave", "2025-01-26 09:00", "The Andromeda Strain!", 3, 0, None),
    ("sc3", "scifi", "alice", "2025-01-26 18:40", "Adding all of these to my list.", 1, 0,
     None),
    ("bb1", "better_book", "judy", "2025-03-20 23:00", "The Princess Bride, and I say that as "
     "a librarian.", 4, 0, None),
    ("bb2", "better_book", "frank", "2025-03-21 08:30", "Jaws. The book has a whole subplot "
     "nobody needs.", 5, 0, None),
    ("bb3", "better_book", "mallory", "2025-03-21 03:15", "Books are for nerds.", 0, 3, None),
    ("mx1", "matrix", "frank", "2025-05-11 10:00", "The lobby scene still holds up.", 3, 0,
     None),
    ("mx2", "matrix", "bob", "2025-05-11 12:30", "The realistic nmap scene is in Reloaded, "
     "not the first one.", 2, 0, None),
    ("mt1", "mountain", "grace", "2025-07-04 21:00", "Add The Summit to your list.", 2, 0,
     None),
    ("ld1", "library_docs", "alice", "2025-08-30 20:00", "Three hours? Sold.", 1, 0, None),
    ("wk1", "weekly", "ivan", "2025-11-02 21:00", "Perfect Days. Quiet and lovely.", 3, 0,
     None),
    ("wk2", "weekly", "alice", "2025-11-03 19:15", "The Seventh Seal for the first time. "
     "Wow.", 2, 0, None),
]

# sender, recipient, sent, subject, body, read
MESSAGES = [
    ("alice", "bob", "2025-09-30 18:00", "Ramen recipe", "Could you share the broth ratios "
     "from your ramen post?", 1),
    ("bob", "alice", "2025-10-01 08:12", "Re: Ramen recipe", "2 tbsp miso and 1 tbsp tahini "
     "per 500 ml of stock.", 1),
    ("heidi", "alice", "2025-10-15 09:30", "Your sourdough question", "Try a longer bake "
     "with the lid off, another 10 minutes at least.", 1),
    ("dave", "alice", "2025-10-28 19:45", "Hiking trip this weekend?", "Are you still in for "
     "the Saturday hike to Eagle Lake? Let me know by Friday.", 0),
    ("judy", "alice", "2025-11-03 10:05", "Book club in December", "We are choosing the "
     "December book. The shortlist is Piranesi, Wolf Hall and The Overstory. Which one "
     "gets your vote?", 0),
    ("mallory", "carol", "2025-07-15 02:40", "Partnership", "Let me post ads in gardening and "
     "I will share the profits.", 0),
    ("grace", "frank", "2025-06-02 12:00", "New Zealand tips", "Loved your film locations "
     "post. Is a campervan the best way to get around?", 1),
    ("alice", "judy", "2025-02-05 09:00", "Thanks for the Flavia tip", "The first book was "
     "perfect. Starting the second one tonight.", 1),
]


class Forum(Site):
    name = "forum"
    title = "Forum"
    volatile = {"messages": ("read",)}  # opening a message marks it read
    answer_kinds = {
        "user": "SELECT username FROM users",
        "forum": "SELECT name FROM forums",
        "post": "SELECT title FROM posts",
    }

    def build(self, db: sqlite3.Connection) -> None:
        db.executescript(SCHEMA)
        rng = random.Random(20250101)
        for i, (username, email, bio, joined, replies, tz) in enumerate(USERS, start=1):
            db.execute("INSERT INTO users (id, username, password, email, bio, joined, "
                       "is_moderator, email_replies, timezone) VALUES (?,?,?,?,?,?,?,?,?)",
                       (i, username, f"{username}-pass", email, bio, joined,
                        int(username in MODERATORS), replies, tz))
        users = {row[1]: row[0] for row in db.execute("SELECT id, username FROM users")}
        for i, (name, title, description, created) in enumerate(FORUMS, start=1):
            db.execute("INSERT INTO forums VALUES (?,?,?,?,?)",
                       (i, name, title, description, created))
        forums = {row[1]: row[0] for row in db.execute("SELECT id, name FROM forums")}
        for username, names in MODERATORS.items():
            for name in names:
                db.execute("INSERT INTO forum_moderators VALUES (?,?)",
                           (forums[name], users[username]))
        for username, names in SUBSCRIPTIONS.items():
            for name in names:
                db.execute("INSERT INTO subscriptions VALUES (?,?)",
                           (users[username], forums[name]))

        voters = [name for name in users if name != "alice"]
        post_ids: dict[str, int] = {}
        for i, (key, forum, author, created, title, body, up, down) in enumerate(POSTS, 1):
            post_ids[key] = i
            db.execute("INSERT INTO posts (id, forum_id, user_id, title, body, created) "
                       "VALUES (?,?,?,?,?,?)",
                       (i, forums[forum], users[author], title, body, created))
            chosen = rng.sample([v for v in voters if v != author], up + down)
            for n, voter in enumerate(chosen):
                db.execute("INSERT INTO post_votes VALUES (?,?,?)",
                           (users[voter], i, 1 if n < up else -1))
        for key, value in ALICE_POST_VOTES.items():
            db.execute("INSERT INTO post_votes VALUES (?,?,?)",
                       (users["alice"], post_ids[key], value))

        comment_ids: dict[str, int] = {}
        for i, (key, post, author, created, body, up, down, parent) in enumerate(COMMENTS, 1):
            comment_ids[key] = i
            db.execute("INSERT INTO comments (id, post_id, user_id, parent_id, body, created) "
                       "VALUES (?,?,?,?,?,?)",
                       (i, post_ids[post], users[author],
                        comment_ids[parent] if parent else None, body, created))
            chosen = rng.sample([v for v in voters if v != author], up + down)
            for n, voter in enumerate(chosen):
                db.execute("INSERT INTO comment_votes VALUES (?,?,?)",
                           (users[voter], i, 1 if n < up else -1))

        for i, (sender, recipient, sent, subject, body, read) in enumerate(MESSAGES, 1):
            db.execute("INSERT INTO messages VALUES (?,?,?,?,?,?,?)",
                       (i, users[sender], users[recipient], subject, body, sent, read))
        db.commit()


SITE = Forum()

# ---- helpers ----------------------------------------------------------------------------


NOTICES = {
    "saved": "Settings saved.",
    "sent": "Message sent.",
    "posted": "Your post was created.",
    "edited": "Your post was updated.",
    "deleted": "Your post was deleted.",
    "commented": "Your comment was posted.",
    "comment-deleted": "Your comment was deleted.",
    "subscribed": "Subscribed.",
    "unsubscribed": "Unsubscribed.",
    "locked": "The post was locked.",
    "unlocked": "The post was unlocked.",
    "removed": "The post was removed.",
    "restored": "The post was restored.",
    "logged-out": "You are logged out.",
}


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


def page(request: Request, template: str, title: str, status_code: int = 200,
         **context: object) -> Response:
    """``forum/<template>.html`` in the layout (``forum/layout.html``): navigation, unread
    messages, the ``done`` notice of the URL."""
    unread = 0
    if request.user is not None:
        unread = request.db.execute(
            "SELECT COUNT(*) FROM messages WHERE recipient_id = ? AND read = 0",
            (request.user["id"],)).fetchone()[0]
    return SITE.render(request, f"forum/{template}.html", status_code, title=title,
                       unread=unread, notice=NOTICES.get(request.arg("done"), ""), **context)


def quote(value: str) -> str:
    """``value`` as one path segment or query value."""
    return urllib.parse.quote(value, safe="")


def blocks(text: str) -> list[list[str]]:
    """A text's paragraphs (blank lines apart), each a list of its lines."""
    return [b.split("\n") for b in (b.strip() for b in text.replace("\r\n", "\n").split("\n\n"))
            if b]


def require_login(request: Request, next_path: str) -> Response | None:
    if request.user is None:
        return redirect("/login?next=" + urllib.parse.quote(next_path, safe="/"))
    return None


def points(n: int) -> str:
    return f"{n} point" if n in (1, -1) else f"{n} points"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


POST_COLUMNS = """
    p.*, f.name AS forum, u.username AS author,
    COALESCE((SELECT SUM(value) FROM post_votes v WHERE v.post_id = p.id), 0) AS score,
    (SELECT COUNT(*) FROM comments c WHERE c.post_id = p.id AND c.deleted = 0) AS n_comments
"""
POST_FROM = " FROM posts p JOIN forums f ON f.id = p.forum_id JOIN users u ON u.id = p.user_id "


def hot(row: sqlite3.Row) -> float:
    created = datetime.datetime.strptime(row["created"], "%Y-%m-%d %H:%M")
    hours = max((NOW - created).total_seconds() / 3600, 0.0)
    return (row["score"] + 1) / (hours + 2) ** 1.5


def sort_posts(rows: Iterable[sqlite3.Row], sort: str) -> list[sqlite3.Row]:
    rows = sorted(rows, key=lambda r: (r["created"], r["id"]), reverse=True)
    if sort == "top":
        rows.sort(key=lambda r: r["score"], reverse=True)
    elif sort == "hot":
        rows.sort(key=hot, reverse=True)
    return rows


def listing(request: Request, rows: list[sqlite3.Row], base: str) -> dict[str, object]:
    """One page of ``rows`` in the order the URL asks (``sort``, ``page``), for the
    ``listing`` macro (forum/macros.html)."""
    sort = request.arg("sort") or "hot"
    if sort not in dict(SORTS):
        sort = "hot"
    rows = sort_posts(rows, sort)
    try:
        number = max(int(request.arg("page") or "1"), 1)
    except ValueError:
        number = 1
    pages = max((len(rows) + PAGE_SIZE - 1) // PAGE_SIZE, 1)
    number = min(number, pages)
    return {"rows": rows[(number - 1) * PAGE_SIZE:number * PAGE_SIZE], "base": base,
            "sort": sort, "number": number, "pages": pages}


def get_post(request: Request, pid: int) -> sqlite3.Row | None:
    return request.db.execute(f"SELECT {POST_COLUMNS} {POST_FROM} WHERE p.id = ?",
                              (pid,)).fetchone()


def is_moderator(request: Request, forum_id: int) -> bool:
    if request.user is None:
        return False
    return request.db.execute(
        "SELECT 1 FROM forum_moderators WHERE forum_id = ? AND user_id = ?",
        (forum_id, request.user["id"])).fetchone() is not None


def forbidden(request: Request, message: str) -> Response:
    return page(request, "message", "Forbidden", 403, heading="Forbidden", text=message)


def missing(request: Request, what: str) -> Response:
    return page(request, "message", "Not found", 404, heading="Not found", text=what)


SITE.templates.filters.update(quote=quote, blocks=blocks, points=points, plural=plural)
SITE.templates.globals.update(sorts=SORTS)


def safe_next(value: str, default: str = "/") -> str:
    if value.startswith("/") and not value.startswith("//"):
        return value
    return default


# ---- front page and forums -------------------------------------------------------------

@SITE.route("/")
def front(request: Request) -> Response:
    rows = request.db.execute(f"SELECT {POST_COLUMNS} {POST_FROM} WHERE p.removed = 0"
                              ).fetchall()
    return page(request, "front", "All posts", page=listing(request, rows, "/"))


FORUM_COLUMNS = """f.*,
    (SELECT COUNT(*) FROM subscriptions s WHERE s.forum_id = f.id) AS subscribers,
    (SELECT COUNT(*) FROM posts p WHERE p.forum_id = f.id AND p.removed = 0) AS n_posts"""


def subscriptions(request: Request) -> set[int]:
    """The ids of the forums the user subscribes to."""
    if request.user is None:
        return set()
    return {row[0] for row in request.db.execute(
        "SELECT forum_id FROM subscriptions WHERE user_id = ?", (request.user["id"],))}


@SITE.route("/forums")
def forums(request: Request) -> Response:
    rows = request.db.execute(f"SELECT {FORUM_COLUMNS} FROM forums f ORDER BY f.name"
                              ).fetchall()
    return page(request, "forums", "Forums", rows=rows, subscribed=subscriptions(request))


@SITE.route("/f/{name}")
def forum(request: Request, name: str) -> Response:
    f = request.db.execute(f"SELECT {FORUM_COLUMNS} FROM forums f WHERE f.name = ?",
                           (name,)).fetchone()
    if f is None:
        return missing(request, f"There is no forum named {name}.")
    rows = request.db.execute(
        f"SELECT {POST_COLUMNS} {POST_FROM} WHERE p.removed = 0 AND p.forum_id = ?",
        (f["id"],)).fetchall()
    mods = [r[0] for r in request.db.execute(
        "SELECT u.username FROM forum_moderators m JOIN users u ON u.id = m.user_id "
        "WHERE m.forum_id = ? ORDER BY u.username", (f["id"],))]
    return page(request, "forum", f["name"], forum=f, moderators=mods,
                subscribed=f["id"] in subscriptions(request),
                page=listing(request, rows, f"/f/{quote(f['name'])}"))


@SITE.route("/f/{name}/subscribe", methods=("POST",))
def subscribe(request: Request, name: str) -> Response:
    return change_subscription(request, name, True)


@SITE.route("/f/{name}/unsubscribe", methods=("POST",))
def unsubscribe(request: Request, name: str) -> Response:
    return change_subscription(request, name, False)


def change_subscription(request: Request, name: str, on: bool) -> Response:
    back = safe_next(request.field("next"), f"/f/{name}")
    denied = require_login(request, back)
    if denied:
        return denied
    f = request.db.execute("SELECT id FROM forums WHERE name = ?", (name,)).fetchone()
    if f is None:
        return missing(request, f"There is no forum named {name}.")
    if on:
        request.db.execute("INSERT OR IGNORE INTO subscriptions VALUES (?, ?)",
                           (request.user["id"], f["id"]))
    else:
        request.db.execute("DELETE FROM subscriptions WHERE user_id = ? AND forum_id = ?",
                           (request.user["id"], f["id"]))
    sep = "&" if "?" in back else "?"
    return redirect(f"{back}{sep}done={'subscribed' if on else 'unsubscribed'}")


# ---- posts and comments ----------------------------------------------------------------

def comment_rows(request: Request, pid: int) -> list[sqlite3.Row]:
    return request.db.execute(
        "SELECT c.*, u.username AS author, "
        "COALESCE((SELECT SUM(value) FROM comment_votes v WHERE v.comment_id = c.id), 0) "
        "AS score FROM comments c JOIN users u ON u.id = c.user_id WHERE c.post_id = ? "
        "ORDER BY c.created, c.id", (pid,)).fetchall()


def my_vote(request: Request, table: str, column: str, item_id: int) -> int:
    if request.user is None:
        return 0
    row = request.db.execute(f"SELECT value FROM {table} WHERE user_id = ? AND {column} = ?",
                             (request.user["id"], item_id)).fetchone()
    return row[0] if row else 0


def thread(request: Request, post: sqlite3.Row) -> dict[str, object]:
    """The post's comments for the ``comment`` macro (forum/macros.html): replies by parent
    id (None: top level), the user's votes, how many are not deleted."""
    comments = comment_rows(request, post["id"])
    children: dict[int | None, list[sqlite3.Row]] = {}
    for c in comments:
        children.setdefault(c["parent_id"], []).append(c)
    votes = {}
    if request.user is not None:
        votes = dict(request.db.execute(
            "SELECT v.comment_id, v.value FROM comment_votes v JOIN comments c ON c.id ="
            " v.comment_id WHERE v.user_id = ? AND c.post_id = ?",
            (request.user["id"], post["id"])).fetchall())
    return {"children": children, "votes": votes, "user": request.user,
            "locked": post["locked"], "count": sum(1 for c in comments if not c["deleted"])}


def render_post_page(request: Request, post: sqlite3.Row, error: str = "", draft: str = "",
                     status: int = 200) -> Response:
    moderator = is_moderator(request, post["forum_id"])
    if post["removed"] and not moderator:
        return page(request, "post", "Removed post", status, hidden=True, post=post)
    return page(request, "post", post["title"], status, hidden=False, post=post,
                moderator=moderator, vote=my_vote(request, "post_votes", "post_id", post["id"]),
                thread=thread(request, post), comment_error=error, draft=draft)


@SITE.route("/post/{pid:int}")
def show_post(request: Request, pid: int) -> Response:
    post = get_post(request, pid)
    if post is None:
        return missing(request, f"There is no post {pid}.")
    return render_post_page(request, post)


def vote(request: Request, table: str, column: str, item_id: int) -> None:
    value = {"up": 1, "down": -1}.get(request.field("dir"))
    if value is None:
        return
    current = my_vote(request, table, column, item_id)
    request.db.execute(f"DELETE FROM {table} WHERE user_id = ? AND {column} = ?",
                       (request.user["id"], item_id))
    if current != value:  # clicking the same vote again takes it back
        request.db.execute(f"INSERT INTO {table} (user_id, {column}, value) VALUES (?, ?, ?)",
                           (request.user["id"], item_id, value))


@SITE.route("/post/{pid:int}/vote", methods=("POST",))
def vote_post(request: Request, pid: int) -> Response:
    denied = require_login(request, f"/post/{pid}")
    if denied:
        return denied
    post = get_post(request, pid)
    if post is None:
        return missing(request, f"There is no post {pid}.")
    vote(request, "post_votes", "post_id", pid)
    return redirect(f"/post/{pid}")


@SITE.route("/post/{pid:int}/comment", methods=("POST",))
def add_comment(request: Request, pid: int) -> Response:
    denied = require_login(request, f"/post/{pid}")
    if denied:
        return denied
    post = get_post(request, pid)
    if post is None or (post["removed"] and not is_moderator(request, post["forum_id"])):
        return missing(request, f"There is no post {pid}.")
    if post["locked"]:
        return render_post_page(request, post, "This post is locked; you cannot comment.",
                                status=403)
    body = request.field("body")
    if not body:
        return render_post_page(request, post, "Write a comment first.", status=400)
    cur = request.db.execute("INSERT INTO comments (post_id, user_id, body, created) "
                             "VALUES (?, ?, ?, ?)", (pid, request.user["id"], body, now()))
    return redirect(f"/post/{pid}?done=commented#comment-{cur.lastrowid}")


def post_form(request: Request, action: str, title: str, button: str, values: dict[str, str],
              errors: list[str], choose_forum: bool) -> Response:
    forums = None
    if choose_forum:
        forums = [(name, name) for (name,) in
                  request.db.execute("SELECT name FROM forums ORDER BY name")]
    return page(request, "post_form", title, 400 if errors else 200, action=action,
                button=button, values=values, messages=errors, forums=forums)


def check_post_fields(title: str, body: str) -> list[str]:
    errors = []
    if not title:
        errors.append("Title is required.")
    elif len(title) > 200:
        errors.append("Title must be at most 200 characters.")
    if len(body) > 10000:
        errors.append("Body must be at most 10000 characters.")
    return errors


@SITE.route("/submit", methods=("GET", "POST"))
def submit(request: Request) -> Response:
    denied = require_login(request, "/submit")
    if denied:
        return denied
    if request.method == "GET":
        return post_form(request, "/submit", "Submit a post", "Create post",
                         {"forum": request.arg("forum")}, [], True)
    values = {k: request.field(k) for k in ("forum", "title", "body")}
    f = request.db.execute("SELECT id FROM forums WHERE name = ?", (values["forum"],)
                           ).fetchone()
    errors = [] if f else ["Choose a forum."]
    errors += check_post_fields(values["title"], values["body"])
    if errors:
        return post_form(request, "/submit", "Submit a post", "Create post", values, errors,
                         True)
    cur = request.db.execute(
        "INSERT INTO posts (forum_id, user_id, title, body, created) VALUES (?, ?, ?, ?, ?)",
        (f["id"], request.user["id"], values["title"], values["body"], now()))
    return redirect(f"/post/{cur.lastrowid}?done=posted")


@SITE.route("/post/{pid:int}/edit", methods=("GET", "POST"))
def edit_post(request: Request, pid: int) -> Response:
    denied = require_login(request, f"/post/{pid}/edit")
    if denied:
        return denied
    post = get_post(request, pid)
    if post is None:
        return missing(request, f"There is no post {pid}.")
    if post["user_id"] != request.user["id"]:
        return forbidden(request, "You can only edit your own posts.")
    if request.method == "GET":
        values = {"title": post["title"], "body": post["body"]}
        return post_form(request, f"/post/{pid}/edit", "Edit post", "Save changes", values,
                         [], False)
    values = {"title": request.field("title"), "body": request.field("body")}
    errors = check_post_fields(values["title"], values["body"])
    if errors:
        return post_form(request, f"/post/{pid}/edit", "Edit post", "Save changes", values,
                         errors, False)
    request.db.execute("UPDATE posts SET title = ?, body = ?, edited = ? WHERE id = ?",
                       (values["title"], values["body"], now(), pid))
    return redirect(f"/post/{pid}?done=edited")


@SITE.route("/post/{pid:int}/delete", methods=("POST",))
def delete_post(request: Request, pid: int) -> Response:
    denied = require_login(request, f"/post/{pid}")
    if denied:
        return denied
    post = get_post(request, pid)
    if post is None:
        return missing(request, f"There is no post {pid}.")
    if post["user_id"] != request.user["id"]:
        return forbidden(request, "You can only delete your own posts.")
    db = request.db
    db.execute("DELETE FROM comment_votes WHERE comment_id IN "
               "(SELECT id FROM comments WHERE post_id = ?)", (pid,))
    db.execute("DELETE FROM comments WHERE post_id = ?", (pid,))
    db.execute("DELETE FROM post_votes WHERE post_id = ?", (pid,))
    db.execute("DELETE FROM posts WHERE id = ?", (pid,))
    return redirect(f"/f/{post['forum']}?done=deleted")


def moderate(request: Request, pid: int, action: str) -> Response:
    denied = require_login(request, f"/post/{pid}")
    if denied:
        return denied
    post = get_post(request, pid)
    if post is None:
        return missing(request, f"There is no post {pid}.")
    if not is_moderator(request, post["forum_id"]):
        return forbidden(request, f"Only moderators of {post['forum']} can do that.")
    column, value = {"lock": ("locked", 1), "unlock": ("locked", 0),
                     "remove": ("removed", 1), "restore": ("removed", 0)}[action]
    request.db.execute(f"UPDATE posts SET {column} = ? WHERE id = ?", (value, pid))
    request.db.execute("INSERT INTO mod_log (moderator_id, post_id, action, created) "
                       "VALUES (?, ?, ?, ?)", (request.user["id"], pid, action, now()))
    done = {"lock": "locked", "unlock": "unlocked", "remove": "removed",
            "restore": "restored"}[action]
    return redirect(f"/post/{pid}?done={done}")


@SITE.route("/post/{pid:int}/lock", methods=("POST",))
def lock_post(request: Request, pid: int) -> Response:
    return moderate(request, pid, "lock")


@SITE.route("/post/{pid:int}/unlock", methods=("POST",))
def unlock_post(request: Request, pid: int) -> Response:
    return moderate(request, pid, "unlock")


@SITE.route("/post/{pid:int}/remove", methods=("POST",))
def remove_post(request: Request, pid: int) -> Response:
    return moderate(request, pid, "remove")


@SITE.route("/post/{pid:int}/restore", methods=("POST",))
def restore_post(request: Request, pid: int) -> Response:
    return moderate(request, pid, "restore")


def get_comment(request: Request, cid: int) -> sqlite3.Row | None:
    return request.db.execute(
        "SELECT c.*, u.username AS author FROM comments c JOIN users u ON u.id = c.user_id "
        "WHERE c.id = ? AND c.deleted = 0", (cid,)).fetchone()


@SITE.route("/comment/{cid:int}/vote", methods=("POST",))
def vote_comment(request: Request, cid: int) -> Response:
    comment = get_comment(request, cid)
    if comment is None:
        return missing(request, f"There is no comment {cid}.")
    denied = require_login(request, f"/post/{comment['post_id']}")
    if denied:
        return denied
    vote(request, "comment_votes", "comment_id", cid)
    return redirect(f"/post/{comment['post_id']}#comment-{cid}")


@SITE.route("/comment/{cid:int}/reply", methods=("GET", "POST"))
def reply_comment(request: Request, cid: int) -> Response:
    comment = get_comment(request, cid)
    if comment is None:
        return missing(request, f"There is no comment {cid}.")
    denied = require_login(request, f"/comment/{cid}/reply")
    if denied:
        return denied
    post = get_post(request, comment["post_id"])
    if post["locked"]:
        return forbidden(request, "This post is locked; you cannot reply.")
    error = ""
    if request.method == "POST":
        body = request.field("body")
        if body:
            cur = request.db.execute(
                "INSERT INTO comments (post_id, user_id, parent_id, body, created) "
                "VALUES (?, ?, ?, ?, ?)", (post["id"], request.user["id"], cid, body, now()))
            return redirect(f"/post/{post['id']}?done=commented#comment-{cur.lastrowid}")
        error = "Write a reply first."
    return page(request, "reply", "Reply", 400 if error else 200, comment=comment, post=post,
                reply_error=error)


@SITE.route("/comment/{cid:int}/delete", methods=("POST",))
def delete_comment(request: Request, cid: int) -> Response:
    comment = get_comment(request, cid)
    if comment is None:
        return missing(request, f"There is no comment {cid}.")
    denied = require_login(request, f"/post/{comment['post_id']}")
    if denied:
        return denied
    if comment["user_id"] != request.user["id"]:
        return forbidden(request, "You can only delete your own comments.")
    request.db.execute("UPDATE comments SET deleted = 1 WHERE id = ?", (cid,))
    return redirect(f"/post/{comment['post_id']}?done=comment-deleted")


# ---- users -----------------------------------------------------------------------------

def karma(db: sqlite3.Connection, user_id: int) -> int:
    posts = db.execute("SELECT COALESCE(SUM(v.value), 0) FROM post_votes v JOIN posts p "
                       "ON p.id = v.post_id WHERE p.user_id = ?", (user_id,)).fetchone()[0]
    comments = db.execute("SELECT COALESCE(SUM(v.value), 0) FROM comment_votes v JOIN comments"
                          " c ON c.id = v.comment_id WHERE c.user_id = ? AND c.deleted = 0",
                          (user_id,)).fetchone()[0]
    return posts + comments


@SITE.route("/u/{username}")
def profile(request: Request, username: str) -> Response:
    db = request.db
    u = db.execute("SELECT * FROM users WHERE username = ?", (username,)).fetchone()
    if u is None:
        return missing(request, f"There is no user named {username}.")
    posts = db.execute(f"SELECT {POST_COLUMNS} {POST_FROM} WHERE p.user_id = ? AND "
                       "p.removed = 0 ORDER BY p.created DESC", (u["id"],)).fetchall()
    comments = db.execute(
        "SELECT c.*, p.title, "
        "COALESCE((SELECT SUM(value) FROM comment_votes v WHERE v.comment_id = c.id), 0) "
        "AS score FROM comments c JOIN posts p ON p.id = c.post_id WHERE c.user_id = ? AND "
        "c.deleted = 0 AND p.removed = 0 ORDER BY c.created DESC", (u["id"],)).fetchall()
    moderates = [r[0] for r in db.execute(
        "SELECT f.name FROM forum_moderators m JOIN forums f ON f.id = m.forum_id "
        "WHERE m.user_id = ? ORDER BY f.name", (u["id"],))]
    return page(request, "profile", u["username"], u=u, karma=karma(db, u["id"]),
                posts=posts, comments=comments, moderates=moderates)


@SITE.route("/settings", methods=("GET", "POST"))
def settings(request: Request) -> Response:
    denied = require_login(request, "/settings")
    if denied:
        return denied
    u = request.user
    errors = []
    values = {"email": u["email"], "bio": u["bio"], "timezone": u["timezone"],
              "email_replies": bool(u["email_replies"])}
    if request.method == "POST":
        values = {"email": request.field("email"), "bio": request.field("bio"),
                  "timezone": request.field("timezone"),
                  "email_replies": request.field("email_replies") == "on"}
        if "@" not in values["email"] or " " in values["email"]:
            errors.append("Enter a valid email address.")
        if len(values["bio"]) > 500:
            errors.append("The bio must be at most 500 characters.")
        if values["timezone"] not in TIME_ZONES:
            errors.append("Choose a time zone from the list.")
        if not errors:
            request.db.execute("UPDATE users SET email = ?, bio = ?, timezone = ?, "
                               "email_replies = ? WHERE id = ?",
                               (values["email"], values["bio"], values["timezone"],
                                int(values["email_replies"]), u["id"]))
            return redirect("/settings?done=saved")
    return page(request, "settings", "Settings", 400 if errors else 200, values=values,
                messages=errors, zones=[(z, z) for z in TIME_ZONES])


@SITE.route("/login", methods=("GET", "POST"))
def login(request: Request) -> Response:
    back = safe_next(request.arg("next") or request.field("next"))
    error = ""
    if request.method == "POST":
        u = request.db.execute("SELECT * FROM users WHERE username = ?",
                               (request.field("username"),)).fetchone()
        if u is not None and u["password"] == request.raw_field("password"):
            request.log_in(u["id"])
            return redirect(back)
        error = "Wrong username or password."
    return page(request, "login", "Log in", 401 if error else 200, back=back,
                login_error=error)


@SITE.route("/logout", methods=("GET", "POST"))
def logout(request: Request) -> Response:
    request.log_out()
    return redirect("/?done=logged-out")


# ---- messages --------------------------------------------------------------------------


def messages_page(request: Request, title: str, who: str, sent: bool) -> Response:
    """The inbox (``who`` "From") or the sent messages ("To")."""
    mine, other = ("sender_id", "recipient_id") if sent else ("recipient_id", "sender_id")
    rows = request.db.execute(
        f"SELECT m.*, u.username AS other FROM messages m JOIN users u ON u.id = m.{other}"
        f" WHERE m.{mine} = ? ORDER BY m.sent DESC, m.id DESC",
        (request.user["id"],)).fetchall()
    return page(request, "messages", title, rows=rows, who=who)


@SITE.route("/messages")
def inbox(request: Request) -> Response:
    return require_login(request, "/messages") or messages_page(request, "Inbox", "From",
                                                                 sent=False)


@SITE.route("/messages/sent")
def sent(request: Request) -> Response:
    return require_login(request, "/messages/sent") or messages_page(
        request, "Sent messages", "To", sent=True)


@SITE.route("/messages/new", methods=("GET", "POST"))
def new_message(request: Request) -> Response:
    denied = require_login(request, "/messages/new")
    if denied:
        return denied
    errors = []
    if request.method == "GET":
        values = {"to": request.arg("to"), "subject": request.arg("subject"), "body": ""}
    else:
        values = {k: request.field(k) for k in ("to", "subject", "body")}
        recipient = request.db.execute("SELECT id FROM users WHERE username = ?",
                                       (values["to"],)).fetchone()
        if not values["to"]:
            errors.append("Enter a recipient.")
        elif recipient is None:
            errors.append(f"There is no user named {values['to']}.")
        elif recipient["id"] == request.user["id"]:
            errors.append("You cannot send a message to yourself.")
        if not values["subject"]:
            errors.append("Subject is required.")
        if not values["body"]:
            errors.append("Message is required.")
        if not errors:
            request.db.execute(
                "INSERT INTO messages (sender_id, recipient_id, subject, body, sent) "
                "VALUES (?, ?, ?, ?, ?)",
                (request.user["id"], recipient["id"], values["subject"], values["body"], now()))
            return redirect("/messages/sent?done=sent")
    return page(request, "new_message", "New message", 400 if errors else 200, values=values,
                messages=errors)


@SITE.route("/messages/{mid:int}")
def read_message(request: Request, mid: int) -> Response:
    denied = require_login(request, f"/messages/{mid}")
    if denied:
        return denied
    m = request.db.execute(
        "SELECT m.*, s.username AS sender, r.username AS recipient FROM messages m "
        "JOIN users s ON s.id = m.sender_id JOIN users r ON r.id = m.recipient_id "
        "WHERE m.id = ?", (mid,)).fetchone()
    me = request.user["id"]
    if m is None or me not in (m["sender_id"], m["recipient_id"]):
        return missing(request, f"There is no message {mid}.")
    subject = ""  # a reply's subject: only the recipient replies
    if m["recipient_id"] == me:
        if not m["read"]:
            request.db.execute("UPDATE messages SET read = 1 WHERE id = ?", (mid,))
        subject = m["subject"] if m["subject"].startswith("Re: ") else f"Re: {m['subject']}"
    return page(request, "message_read", m["subject"], m=m, reply_subject=subject)

@SITE.route("/search")
def search(request: Request) -> Response:
    q = request.arg("q")
    if not q:
        return page(request, "search", "Search", q="")
    pattern = "%" + q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    rows = request.db.execute(
        f"SELECT {POST_COLUMNS} {POST_FROM} WHERE p.removed = 0 AND "
        "(lower(p.title) LIKE ? ESCAPE '\\' OR lower(p.body) LIKE ? ESCAPE '\\') "
        "ORDER BY p.created DESC", (pattern, pattern)).fetchall()
    return page(request, "search", f"Search: {q}", q=q, rows=rows)


__all__ = ["SITE", "Forum"]
