"""Harbor Market: a small online shop in the style of WebArena's "One Stop Market".

Customers browse categories, search, read and write reviews, keep a wishlist and an
address book, fill a cart (with a coupon), check out and follow or cancel their orders;
the admin area (``/admin``, administrators only) edits products, moves orders through
their statuses with comments, lists customers and shows the bestseller and low-stock
reports. Pages are plain server-rendered HTML with labelled form fields, so everything
an agent needs is in the accessibility tree.

Money is kept as integer cents. The seed (:meth:`Shop.build`) is fixed: 41 products in 5
categories, an admin and four customers, 16 orders from March to December 2025, reviews,
wishlists, one cart and two coupons. The shop's clock is fixed at :data:`NOW`, so an
episode's new orders and reviews are dated the same on every run.
"""

from __future__ import annotations

import re
import sqlite3
import urllib.parse

from starlette.responses import Response

from agentgym.plugins.web.sites.site import Site, redirect
from agentgym.plugins.web.sites.site import SiteRequest as Request

#: The shop's clock: new orders, reviews and comments are dated at this moment.
NOW = "2025-12-15 10:30"
#: Shipping methods: key -> (label, price in cents).
SHIPPING = {"standard": ("Standard shipping", 500), "express": ("Express shipping", 1500)}
#: Order statuses in their usual sequence.
STATUSES = ("pending", "processing", "shipped", "delivered", "cancelled")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")

# ---- seed data ----------------------------------------------------------------------------

CATEGORIES = [
    ("grocery", "Grocery & Gourmet", "Coffee, tea, pantry staples and treats."),
    ("kitchen", "Home & Kitchen", "Cookware, tools and storage for everyday cooking."),
    ("electronics", "Electronics", "Audio, charging and gadgets for your desk."),
    ("beauty", "Beauty & Personal Care", "Skin care, hair care and bath essentials."),
    ("office", "Office Products", "Paper, pens and a better desk setup."),
]

# (sku, category, name, price in cents, stock, featured, enabled, description)
PRODUCTS = [
    ("GR-101", "grocery", "Dark Roast Coffee Beans 1 lb", 1499, 40, 1, 1,
     "Whole bean coffee with a smoky, bittersweet finish. A blend of Colombian and "
     "Sumatran beans, roasted in small batches."),
    ("GR-102", "grocery", "Organic Green Tea (100 bags)", 849, 65, 0, 1,
     "Certified organic sencha green tea in unbleached tea bags. Light and grassy."),
    ("GR-103", "grocery", "Wildflower Honey 16 oz", 1125, 22, 0, 1,
     "Raw, unfiltered honey from meadows in upstate New York."),
    ("GR-104", "grocery", "Extra Virgin Olive Oil 1 L", 1890, 30, 0, 1,
     "Cold-pressed Greek olive oil with a peppery taste. Great for dressings."),
    ("GR-105", "grocery", "Sea Salt Dark Chocolate Bar", 375, 120, 1, 1,
     "72% cacao chocolate sprinkled with flakes of sea salt. 3.5 oz bar."),
    ("GR-106", "grocery", "Organic Rolled Oats 2 lb", 620, 48, 0, 1,
     "Thick-cut whole grain oats for porridge, baking and overnight oats."),
    ("GR-107", "grocery", "Maple Granola Clusters", 795, 4, 0, 1,
     "Crunchy oat clusters baked with maple syrup, pecans and a pinch of cinnamon."),
    ("GR-108", "grocery", "Spicy Peanut Butter 12 oz", 560, 0, 0, 1,
     "Creamy peanut butter blended with chili flakes and smoked paprika."),
    ("KI-201", "kitchen", "Stainless Steel Electric Kettle", 3499, 18, 1, 1,
     "1.7 liter kettle with automatic shut-off and a keep-warm setting."),
    ("KI-202", "kitchen", "Cast Iron Skillet 10 inch", 2750, 12, 0, 1,
     "Pre-seasoned cast iron pan that goes from the stove top to the oven."),
    ("KI-203", "kitchen", "Bamboo Cutting Board Set", 2200, 25, 0, 1,
     "Three boards in different sizes with juice grooves. Made from sustainable bamboo."),
    ("KI-204", "kitchen", "Ceramic Pour-Over Coffee Dripper", 1995, 3, 0, 1,
     "Hand-glazed ceramic dripper for size 02 paper filters. Brews one or two cups."),
    ("KI-205", "kitchen", "Glass Food Storage Containers (10 pack)", 2999, 33, 0, 1,
     "Oven-safe glass containers with snap-lock lids in five sizes."),
    ("KI-206", "kitchen", "Chef's Knife 8 inch", 4500, 9, 1, 1,
     "High-carbon stainless steel blade with a full tang and an ergonomic handle."),
    ("KI-207", "kitchen", "Linen Kitchen Towels (set of 4)", 1640, 40, 0, 1,
     "Absorbent stonewashed linen towels in natural, sage, rust and charcoal."),
    ("KI-208", "kitchen", "Bamboo Salad Servers", 1280, 0, 0, 1,
     "A pair of lightweight serving utensils carved from one piece of bamboo."),
    ("EL-301", "electronics", "Wireless Noise-Cancelling Headphones", 12900, 14, 1, 1,
     "Over-ear headphones with active noise cancelling and 30 hours of battery life."),
    ("EL-302", "electronics", "Portable Bluetooth Speaker", 4999, 27, 0, 1,
     "Waterproof speaker with 12 hours of playback and a built-in microphone."),
    ("EL-303", "electronics", "USB-C Charging Cable 6 ft", 999, 150, 0, 1,
     "Braided nylon cable that supports fast charging and data transfer."),
    ("EL-304", "electronics", "10000 mAh Power Bank", 2495, 2, 0, 1,
     "Slim power bank with USB-C and USB-A ports. Charges a phone about twice."),
    ("EL-305", "electronics", "Smart LED Desk Lamp", 3950, 11, 0, 1,
     "Dimmable desk lamp with five color temperatures and a USB charging port."),
    ("EL-306", "electronics", "Mechanical Keyboard", 8900, 7, 0, 1,
     "Tenkeyless keyboard with tactile brown switches and white backlighting."),
    ("EL-307", "electronics", "Wireless Ergonomic Mouse", 3275, 19, 0, 1,
     "Vertical mouse that keeps your wrist in a natural handshake position."),
    ("EL-308", "electronics", "Clip-On Reading Lamp", 1525, 0, 0, 1,
     "Rechargeable book light with a flexible neck and three brightness levels."),
    ("BE-401", "beauty", "Lavender Body Lotion 8 oz", 1200, 36, 1, 1,
     "Fast-absorbing lotion with shea butter and lavender essential oil."),
    ("BE-402", "beauty", "Charcoal Face Mask", 950, 21, 0, 1,
     "Clay mask with activated charcoal that clears pores in ten minutes."),
    ("BE-403", "beauty", "Bamboo Toothbrush (4 pack)", 799, 80, 0, 1,
     "Biodegradable handles with soft, BPA-free bristles."),
    ("BE-404", "beauty", "Argan Oil Hair Serum", 2130, 15, 0, 1,
     "Lightweight serum that tames frizz and adds shine without grease."),
    ("BE-405", "beauty", "Mineral Sunscreen SPF 50", 1675, 4, 0, 1,
     "Zinc oxide sunscreen that is reef friendly and water resistant for 80 minutes."),
    ("BE-406", "beauty", "Unscented Shaving Cream", 645, 44, 0, 1,
     "Rich lather for sensitive skin, free of fragrance and dyes."),
    ("BE-407", "beauty", "Rosewater Facial Toner", 1320, 17, 0, 1,
     "Alcohol-free toner with rosewater and witch hazel."),
    ("BE-408", "beauty", "Eucalyptus Bath Salts", 1060, 26, 0, 1,
     "Epsom and sea salts with eucalyptus oil for a relaxing soak."),
    ("OF-501", "office", "Recycled Paper Notebook (3 pack)", 1149, 55, 0, 1,
     "A5 notebooks with dotted pages made from 100% recycled paper."),
    ("OF-502", "office", "Gel Ink Pens (12 pack)", 899, 70, 0, 1,
     "Smooth 0.7 mm gel pens in assorted colors with quick-drying ink."),
    ("OF-503", "office", "Adjustable Laptop Stand", 3600, 13, 1, 1,
     "Aluminium stand with six height settings for laptops up to 17 inches."),
    ("OF-504", "office", "Cork Desk Organizer", 1825, 1, 0, 1,
     "Five compartments for pens, notes and cables, made from natural cork."),
    ("OF-505", "office", "Heavy-Duty Stapler", 1410, 23, 0, 1,
     "Staples up to 100 sheets at once with little effort."),
    ("OF-506", "office", "Whiteboard Marker Set", 695, 38, 0, 1,
     "Eight low-odor dry-erase markers with chisel tips."),
    ("OF-507", "office", "Ergonomic Office Chair Cushion", 2780, 16, 0, 1,
     "Memory foam seat cushion that relieves pressure on the lower back."),
    ("OF-508", "office", "Bamboo Monitor Riser", 4250, 8, 0, 1,
     "Raises your screen to eye level and keeps a keyboard underneath."),
    ("GR-109", "grocery", "Holiday Gift Basket", 5900, 0, 0, 0,
     "Seasonal basket with coffee, chocolate, honey and granola. Available in winter."),
]

# (username, password, full name, email, newsletter, is_admin)
USERS = [
    ("admin", "admin1234", "Store Admin", "admin@harbormarket.test", 0, 1),
    ("alice", "alice1234", "Alice Johnson", "alice@example.com", 1, 0),
    ("bob", "bob12345", "Bob Martinez", "bob@example.com", 0, 0),
    ("carol", "carol1234", "Carol Nguyen", "carol@example.com", 1, 0),
    ("dave", "dave1234", "Dave Wilson", "dave@example.com", 0, 0),
]

# (username, full name, street, city, zip, is_default)
ADDRESSES = [
    ("alice", "Alice Johnson", "12 Oak Street", "Springfield", "62704", 1),
    ("bob", "Bob Martinez", "88 Pine Avenue", "Riverton", "82501", 1),
    ("carol", "Carol Nguyen", "5 Lakeview Drive", "Madison", "53703", 1),
    ("carol", "Carol Nguyen", "9 Elm Street", "Madison", "53711", 0),
    ("dave", "Dave Wilson", "301 Market Street", "Denver", "80202", 1),
]

# (order id, username, date, status, shipping, coupon, street of the address, items)
ORDERS = [
    (1001, "alice", "2025-03-14 09:12", "delivered", "standard", None, "12 Oak Street",
     [("Dark Roast Coffee Beans 1 lb", 2), ("Sea Salt Dark Chocolate Bar", 4)]),
    (1002, "bob", "2025-04-02 18:40", "delivered", "express", None, "88 Pine Avenue",
     [("Wireless Noise-Cancelling Headphones", 1)]),
    (1003, "carol", "2025-05-19 12:05", "delivered", "standard", None, "5 Lakeview Drive",
     [("Lavender Body Lotion 8 oz", 1), ("Bamboo Toothbrush (4 pack)", 2),
      ("Argan Oil Hair Serum", 1)]),
    (1004, "alice", "2025-06-07 08:55", "delivered", "standard", None, "12 Oak Street",
     [("Stainless Steel Electric Kettle", 1), ("Organic Green Tea (100 bags)", 2)]),
    (1005, "dave", "2025-06-28 21:17", "cancelled", "standard", None, "301 Market Street",
     [("Mechanical Keyboard", 1)]),
    (1006, "bob", "2025-07-15 14:30", "delivered", "standard", None, "88 Pine Avenue",
     [("USB-C Charging Cable 6 ft", 3), ("Portable Bluetooth Speaker", 1)]),
    (1007, "carol", "2025-08-03 10:02", "delivered", "express", None, "5 Lakeview Drive",
     [("Cast Iron Skillet 10 inch", 1), ("Extra Virgin Olive Oil 1 L", 1)]),
    (1008, "dave", "2025-08-21 16:48", "delivered", "standard", "WELCOME10", "301 Market Street",
     [("Gel Ink Pens (12 pack)", 2), ("Recycled Paper Notebook (3 pack)", 2),
      ("Sea Salt Dark Chocolate Bar", 3)]),
    (1009, "alice", "2025-09-09 11:20", "shipped", "standard", None, "12 Oak Street",
     [("Adjustable Laptop Stand", 1), ("Wireless Ergonomic Mouse", 1)]),
    (1010, "bob", "2025-10-04 19:03", "delivered", "standard", None, "88 Pine Avenue",
     [("Dark Roast Coffee Beans 1 lb", 3), ("Wildflower Honey 16 oz", 1)]),
    (1011, "carol", "2025-10-18 07:45", "delivered", "standard", None, "9 Elm Street",
     [("Sea Salt Dark Chocolate Bar", 2), ("Organic Rolled Oats 2 lb", 1)]),
    (1012, "dave", "2025-10-27 13:36", "processing", "express", None, "301 Market Street",
     [("Smart LED Desk Lamp", 1), ("USB-C Charging Cable 6 ft", 2)]),
    (1013, "alice", "2025-11-12 17:58", "processing", "standard", None, "12 Oak Street",
     [("Bamboo Cutting Board Set", 1), ("Linen Kitchen Towels (set of 4)", 1)]),
    (1014, "bob", "2025-11-30 20:14", "pending", "standard", None, "88 Pine Avenue",
     [("Mineral Sunscreen SPF 50", 2), ("Unscented Shaving Cream", 1)]),
    (1015, "carol", "2025-12-05 09:31", "pending", "express", None, "5 Lakeview Drive",
     [("Chef's Knife 8 inch", 1), ("Ceramic Pour-Over Coffee Dripper", 1)]),
    (1016, "dave", "2025-12-09 15:22", "pending", "standard", None, "301 Market Street",
     [("Portable Bluetooth Speaker", 1), ("Whiteboard Marker Set", 2)]),
]

# (order id, author, date, comment)
ORDER_COMMENTS = [
    (1002, "admin", "2025-04-03 09:00", "Shipped with FedEx, tracking 7712 3456 9921."),
    (1005, "dave", "2025-06-29 08:10", "Cancelled by the customer."),
    (1009, "admin", "2025-09-10 15:45", "Shipped with UPS, tracking 1Z48F6720391847266."),
    (1012, "admin", "2025-10-28 10:20", "Desk lamp back-ordered, ships next week."),
]

# (product, username, rating, review, date)
REVIEWS = [
    ("Stainless Steel Electric Kettle", "alice", 5, "Boils water in under three minutes.",
     "2025-06-20 19:02"),
    ("Stainless Steel Electric Kettle", "bob", 4, "Works well, but it is a bit loud.",
     "2025-07-02 08:31"),
    ("Stainless Steel Electric Kettle", "carol", 2,
     "The lid started sticking after a month.", "2025-08-11 21:47"),
    ("Wireless Noise-Cancelling Headphones", "bob", 5,
     "Great sound and the noise cancelling is superb on flights.", "2025-04-20 13:15"),
    ("Wireless Noise-Cancelling Headphones", "dave", 3,
     "Comfortable, but the battery could last longer.", "2025-05-03 17:40"),
    ("Dark Roast Coffee Beans 1 lb", "alice", 5, "Rich and smoky, my morning favorite.",
     "2025-03-28 07:10"),
    ("Dark Roast Coffee Beans 1 lb", "bob", 4, "Strong flavor, the beans are a little oily.",
     "2025-10-15 09:55"),
    ("Sea Salt Dark Chocolate Bar", "carol", 5, "Perfect balance of salty and sweet.",
     "2025-10-25 20:05"),
    ("Sea Salt Dark Chocolate Bar", "dave", 4, "Great with coffee.", "2025-09-01 16:22"),
    ("Cast Iron Skillet 10 inch", "carol", 4, "Heavy but heats evenly.", "2025-08-20 18:00"),
    ("Lavender Body Lotion 8 oz", "carol", 5, "Smells lovely and absorbs quickly.",
     "2025-06-02 22:13"),
    ("Mechanical Keyboard", "dave", 1, "Two keys stopped working within a week.",
     "2025-06-27 10:48"),
    ("Portable Bluetooth Speaker", "bob", 3, "Good volume, weak bass.", "2025-07-30 12:34"),
    ("Argan Oil Hair Serum", "carol", 4, "Tames frizz without feeling greasy.",
     "2025-06-09 08:20"),
    ("Adjustable Laptop Stand", "alice", 4, "Sturdy and easy to adjust.", "2025-09-25 14:05"),
]

WISHLIST = [("alice", "Chef's Knife 8 inch", "2025-11-02 10:00"),
            ("alice", "Argan Oil Hair Serum", "2025-11-20 21:30"),
            ("bob", "Mechanical Keyboard", "2025-10-12 18:45")]
CART = [("dave", "Wildflower Honey 16 oz", 1), ("dave", "Gel Ink Pens (12 pack)", 2)]
# (code, percent off, active)
COUPONS = [("WELCOME10", 10, 1), ("SUMMER25", 25, 0)]

SCHEMA = """
CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT UNIQUE NOT NULL,
    password TEXT NOT NULL, full_name TEXT NOT NULL, email TEXT NOT NULL,
    newsletter INTEGER NOT NULL DEFAULT 0, is_admin INTEGER NOT NULL DEFAULT 0);
CREATE TABLE categories (id INTEGER PRIMARY KEY, slug TEXT UNIQUE NOT NULL,
    name TEXT NOT NULL, description TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, sku TEXT UNIQUE NOT NULL,
    category_id INTEGER NOT NULL REFERENCES categories(id), name TEXT NOT NULL,
    price INTEGER NOT NULL, stock INTEGER NOT NULL, featured INTEGER NOT NULL DEFAULT 0,
    enabled INTEGER NOT NULL DEFAULT 1, description TEXT NOT NULL);
CREATE TABLE reviews (id INTEGER PRIMARY KEY, product_id INTEGER NOT NULL REFERENCES products(id),
    user_id INTEGER NOT NULL REFERENCES users(id), rating INTEGER NOT NULL,
    body TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE addresses (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id),
    full_name TEXT NOT NULL, street TEXT NOT NULL, city TEXT NOT NULL, zip TEXT NOT NULL,
    is_default INTEGER NOT NULL DEFAULT 0);
CREATE TABLE cart_items (user_id INTEGER NOT NULL REFERENCES users(id),
    product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL,
    PRIMARY KEY (user_id, product_id));
CREATE TABLE coupons (code TEXT PRIMARY KEY, percent_off INTEGER NOT NULL,
    active INTEGER NOT NULL);
CREATE TABLE cart_coupons (user_id INTEGER PRIMARY KEY REFERENCES users(id),
    code TEXT NOT NULL REFERENCES coupons(code));
CREATE TABLE wishlist (user_id INTEGER NOT NULL REFERENCES users(id),
    product_id INTEGER NOT NULL REFERENCES products(id), added TEXT NOT NULL,
    PRIMARY KEY (user_id, product_id));
CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id),
    created TEXT NOT NULL, status TEXT NOT NULL, full_name TEXT NOT NULL, street TEXT NOT NULL,
    city TEXT NOT NULL, zip TEXT NOT NULL, shipping_method TEXT NOT NULL,
    coupon_code TEXT, subtotal INTEGER NOT NULL, discount INTEGER NOT NULL,
    shipping INTEGER NOT NULL, total INTEGER NOT NULL);
CREATE TABLE order_items (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(id),
    product_id INTEGER NOT NULL REFERENCES products(id), name TEXT NOT NULL,
    price INTEGER NOT NULL, quantity INTEGER NOT NULL);
CREATE TABLE order_comments (id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders(id), author TEXT NOT NULL,
    created TEXT NOT NULL, body TEXT NOT NULL);
"""


def money(cents: int) -> str:
    """``1234`` -> ``$12.34`` (``-$1.00`` for a negative amount)."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}${cents // 100:,}.{cents % 100:02d}"


def parse_money(text: str) -> int | None:
    """``"$1,234.5"`` -> ``123450``; None when ``text`` is no amount of money."""
    match = re.fullmatch(r"\$?\s*(\d{1,7})(?:\.(\d{1,2}))?", text.replace(",", "").strip())
    if not match:
        return None
    return int(match.group(1)) * 100 + int((match.group(2) or "0").ljust(2, "0"))


def parse_int(text: str) -> int | None:
    return int(text) if re.fullmatch(r"\d{1,6}", text.strip()) else None


def nice_date(stamp: str) -> str:
    """``2025-09-09 11:20`` -> ``Sep 9, 2025``."""
    year, month, day = stamp[:10].split("-")
    return f"{MONTHS[int(month) - 1][:3]} {int(day)}, {year}"


def month_label(key: str) -> str:
    """``2025-10`` -> ``October 2025``."""
    year, month = key.split("-")
    return f"{MONTHS[int(month) - 1]} {year}"


def discount_for(subtotal: int, percent: int) -> int:
    return (subtotal * percent + 50) // 100


class Shop(Site):
    name = "shop"
    title = "Harbor Market"
    answer_kinds = {
        "product": "SELECT name FROM products",
        "person": "SELECT full_name FROM users UNION SELECT full_name FROM addresses",
        "category": "SELECT name FROM categories",
        "coupon": "SELECT code FROM coupons",
    }

    def build(self, db: sqlite3.Connection) -> None:
        db.executescript(SCHEMA)
        for slug, name, description in CATEGORIES:
            db.execute("INSERT INTO categories (slug, name, description) VALUES (?, ?, ?)",
                       (slug, name, description))
        cat_ids = {row[0]: row[1] for row in db.execute("SELECT slug, id FROM categories")}
        for sku, cat, name, price, stock, featured, enabled, description in PRODUCTS:
            db.execute("INSERT INTO products (sku, category_id, name, price, stock, featured,"
                       " enabled, description) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (sku, cat_ids[cat], name, price, stock, featured, enabled, description))
        for username, password, full_name, email, newsletter, is_admin in USERS:
            db.execute("INSERT INTO users (username, password, full_name, email, newsletter,"
                       " is_admin) VALUES (?, ?, ?, ?, ?, ?)",
                       (username, password, full_name, email, newsletter, is_admin))
        user_ids = {row[0]: row[1] for row in db.execute("SELECT username, id FROM users")}
        products = {row[0]: (row[1], row[2])
                    for row in db.execute("SELECT name, id, price FROM products")}
        addresses = {}
        for username, full_name, street, city, zip_code, is_default in ADDRESSES:
            db.execute("INSERT INTO addresses (user_id, full_name, street, city, zip,"
                       " is_default) VALUES (?, ?, ?, ?, ?, ?)",
                       (user_ids[username], full_name, street, city, zip_code, is_default))
            addresses[street] = (full_name, street, city, zip_code)
        for code, percent, active in COUPONS:
            db.execute("INSERT INTO coupons VALUES (?, ?, ?)", (code, percent, active))
        percents = {code: percent for code, percent, _ in COUPONS}
        for oid, username, created, status, method, coupon, street, items in ORDERS:
            subtotal = sum(products[name][1] * qty for name, qty in items)
            discount = discount_for(subtotal, percents[coupon]) if coupon else 0
            shipping = SHIPPING[method][1]
            db.execute("INSERT INTO orders (id, user_id, created, status, full_name, street,"
                       " city, zip, shipping_method, coupon_code, subtotal, discount, shipping,"
                       " total) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (oid, user_ids[username], created, status, *addresses[street], method,
                        coupon, subtotal, discount, shipping, subtotal - discount + shipping))
            for name, qty in items:
                pid, price = products[name]
                db.execute("INSERT INTO order_items (order_id, product_id, name, price,"
                           " quantity) VALUES (?, ?, ?, ?, ?)", (oid, pid, name, price, qty))
        for oid, author, created, body in ORDER_COMMENTS:
            db.execute("INSERT INTO order_comments (order_id, author, created, body)"
                       " VALUES (?, ?, ?, ?)", (oid, author, created, body))
        for name, username, rating, body, created in REVIEWS:
            db.execute("INSERT INTO reviews (product_id, user_id, rating, body, created)"
                       " VALUES (?, ?, ?, ?, ?)",
                       (products[name][0], user_ids[username], rating, body, created))
        for username, name, added in WISHLIST:
            db.execute("INSERT INTO wishlist VALUES (?, ?, ?)",
                       (user_ids[username], products[name][0], added))
        for username, name, qty in CART:
            db.execute("INSERT INTO cart_items VALUES (?, ?, ?)",
                       (user_ids[username], products[name][0], qty))
        db.commit()


SITE = Shop()

# ---- layout ---------------------------------------------------------------------------------

MESSAGES = {
    "added": "The product was added to your shopping cart.",
    "cart-updated": "Your shopping cart was updated.",
    "removed": "The item was removed from your shopping cart.",
    "coupon-applied": "The coupon was applied to your shopping cart.",
    "coupon-removed": "The coupon was removed from your shopping cart.",
    "wishlist-added": "The product was added to your wishlist.",
    "wishlist-removed": "The product was removed from your wishlist.",
    "wishlist-moved": "The product was moved to your shopping cart.",
    "review-added": "Thank you! Your review was submitted.",
    "cancelled": "Your order was cancelled.",
    "settings-saved": "Your account settings were saved.",
    "password-changed": "Your password was changed.",
    "address-added": "The address was saved.",
    "address-default": "Your default address was updated.",
    "address-deleted": "The address was deleted.",
    "product-saved": "The product was saved.",
    "status-updated": "The order status was updated.",
    "comment-added": "The comment was added to the order.",
    "logged-out": "You have been logged out.",
}
ERRORS = {
    "stock": "Sorry, there are not enough units in stock for that quantity.",
    "quantity": "Please enter a whole number quantity of at least 1.",
    "coupon-invalid": "The coupon code is not valid.",
    "coupon-expired": "This coupon has expired.",
    "cart-empty": "Your shopping cart is empty.",
    "not-pending": "Only pending orders can be cancelled.",
    "comment-empty": "Please enter a comment.",
    "status": "Please choose a valid status.",
    "login-required": "Please log in to continue.",
}


def cart_count(request: Request) -> int:
    if request.user is None:
        return 0
    row = request.db.execute("SELECT COALESCE(SUM(quantity), 0) FROM cart_items"
                             " WHERE user_id = ?", (request.user["id"],)).fetchone()
    return int(row[0])


def page(request: Request, template: str, title: str, status_code: int = 200,
         errors: list[str] | None = None, **context: object) -> Response:
    """``shop/<template>.html`` in the layout (``shop/layout.html``): navigation, the
    ``msg``/``err`` notices of the URL and ``errors``."""
    error = ERRORS.get(request.arg("err"))
    categories = request.db.execute("SELECT slug, name FROM categories ORDER BY id").fetchall()
    return SITE.render(request, f"shop/{template}.html", status_code, title=title,
                       notice=MESSAGES.get(request.arg("msg")), cart_count=cart_count(request),
                       errors=([error] if error else []) + list(errors or []),
                       categories=categories, **context)


def missing(request: Request, what: str = "page") -> Response:
    return page(request, "message", "Page not found", 404, heading="Page not found",
                text=f"Sorry, the {what} you are looking for does not exist.")


def login_first(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}"
                                 if request.url.query and request.method == "GET" else "")
    return redirect("/login?" + urllib.parse.urlencode({"next": target, "err": "login-required"}))


def forbidden(request: Request) -> Response:
    return page(request, "message", "Access denied", 403, heading="Access denied",
                text="This area is for store administrators only.",
                login_link=request.user is None)


def is_admin(request: Request) -> bool:
    return request.user is not None and bool(request.user["is_admin"])


# ---- catalog ------------------------------------------------------------------------------

SORTS = {
    "name": ("Name (A to Z)", "p.name"),
    "price_asc": ("Price: low to high", "p.price, p.name"),
    "price_desc": ("Price: high to low", "p.price DESC, p.name"),
    "rating": ("Customer rating", "avg_rating DESC, p.name"),
}
PRODUCT_ROWS = ("SELECT p.*, (SELECT AVG(rating) FROM reviews r WHERE r.product_id = p.id)"
                " AS avg_rating, (SELECT COUNT(*) FROM reviews r WHERE r.product_id = p.id)"
                " AS review_count FROM products p")


def rating_text(avg: float | None, count: int) -> str:
    if not count:
        return "No reviews yet"
    return f"{avg:.1f} out of 5 ({count} review{'s' if count != 1 else ''})"


def availability(stock: int) -> str:
    return "In stock" if stock > 0 else "Out of stock"


SITE.templates.filters.update(money=money, nice_date=nice_date, month_label=month_label,
                              availability=availability)
SITE.templates.globals.update(
    rating_text=rating_text, sort_options=[(key, label) for key, (label, _) in SORTS.items()],
    shipping_label=lambda method: SHIPPING.get(method, (method, 0))[0])


@SITE.route("/")
def home(request: Request) -> Response:
    rows = request.db.execute(PRODUCT_ROWS + " WHERE p.enabled = 1 AND p.featured = 1"
                              " ORDER BY p.name").fetchall()
    count = request.db.execute("SELECT COUNT(*) FROM products WHERE enabled = 1").fetchone()[0]
    return page(request, "home", "Home", rows=rows, count=count)


def sort_of(request: Request) -> str:
    sort = request.arg("sort", "name")
    return sort if sort in SORTS else "name"


@SITE.route("/category/{slug}")
def category(request: Request, slug: str) -> Response:
    cat = request.db.execute("SELECT * FROM categories WHERE slug = ?", (slug,)).fetchone()
    if cat is None:
        return missing(request, "category")
    sort = sort_of(request)
    rows = request.db.execute(PRODUCT_ROWS + " WHERE p.enabled = 1 AND p.category_id = ?"
                              f" ORDER BY {SORTS[sort][1]}", (cat["id"],)).fetchall()
    return page(request, "category", cat["name"], category=cat, sort=sort, rows=rows)


@SITE.route("/search")
def search(request: Request) -> Response:
    query = request.arg("q")
    if not query:
        return page(request, "search", "Search", query="")
    sort = sort_of(request)
    pattern = "%" + re.sub(r"([\\%_])", r"\\\1", query) + "%"
    rows = request.db.execute(
        PRODUCT_ROWS + " WHERE p.enabled = 1 AND (p.name LIKE ? ESCAPE '\\'"
        f" OR p.description LIKE ? ESCAPE '\\') ORDER BY {SORTS[sort][1]}",
        (pattern, pattern)).fetchall()
    return page(request, "search", f"Search: {query}", query=query, sort=sort, rows=rows)


def visible_product(request: Request, pid: int) -> sqlite3.Row | None:
    row = request.db.execute(PRODUCT_ROWS + " WHERE p.id = ?", (pid,)).fetchone()
    if row is None or (not row["enabled"] and not is_admin(request)):
        return None
    return row


@SITE.route("/product/{pid:int}")
def product(request: Request, pid: int) -> Response:
    row = visible_product(request, pid)
    if row is None:
        return missing(request, "product")
    return product_page(request, row, [])


def product_page(request: Request, row: sqlite3.Row, errors: list[str]) -> Response:
    db, pid = request.db, row["id"]
    cat = db.execute("SELECT name FROM categories WHERE id = ?", (row["category_id"],)).fetchone()
    listed = request.user is not None and db.execute(
        "SELECT 1 FROM wishlist WHERE user_id = ? AND product_id = ?",
        (request.user["id"], pid)).fetchone() is not None
    reviews = db.execute("SELECT r.*, u.full_name FROM reviews r JOIN users u"
                         " ON u.id = r.user_id WHERE r.product_id = ?"
                         " ORDER BY r.created DESC, r.id DESC", (pid,)).fetchall()
    ratings = [(str(n), f"{n} star{'s' if n > 1 else ''}") for n in range(5, 0, -1)]
    return page(request, "product", row["name"], 200, errors, row=row, category=cat["name"],
                listed=listed, reviews=reviews, ratings=ratings)


@SITE.route("/product/{pid:int}/review", methods=("POST",))
def add_review(request: Request, pid: int) -> Response:
    if request.user is None:
        return login_first(request)
    row = visible_product(request, pid)
    if row is None:
        return missing(request, "product")
    rating = parse_int(request.field("rating"))
    text = request.field("review")
    errors = []
    if rating is None or not 1 <= rating <= 5:
        errors.append("Please choose a rating from 1 to 5 stars.")
    if not text:
        errors.append("Please write a few words for your review.")
    if errors:
        return product_page(request, row, errors)
    request.db.execute("INSERT INTO reviews (product_id, user_id, rating, body, created)"
                       " VALUES (?, ?, ?, ?, ?)", (pid, request.user["id"], rating, text, NOW))
    return redirect(f"/product/{pid}?msg=review-added")


# ---- cart and checkout --------------------------------------------------------------------

def cart_lines(request: Request) -> list[sqlite3.Row]:
    return request.db.execute(
        "SELECT c.product_id, c.quantity, p.name, p.price, p.stock, p.enabled"
        " FROM cart_items c JOIN products p ON p.id = c.product_id"
        " WHERE c.user_id = ? ORDER BY p.name", (request.user["id"],)).fetchall()


def cart_coupon(request: Request) -> sqlite3.Row | None:
    return request.db.execute(
        "SELECT k.* FROM cart_coupons c JOIN coupons k ON k.code = c.code"
        " WHERE c.user_id = ?", (request.user["id"],)).fetchone()


def cart_totals(request: Request) -> tuple[int, int, sqlite3.Row | None]:
    subtotal = sum(line["price"] * line["quantity"] for line in cart_lines(request))
    coupon = cart_coupon(request)
    discount = discount_for(subtotal, coupon["percent_off"]) if coupon else 0
    return subtotal, discount, coupon


@SITE.route("/cart/add", methods=("POST",))
def cart_add(request: Request) -> Response:
    pid = parse_int(request.field("product_id")) or 0
    if request.user is None:
        return redirect("/login?" + urllib.parse.urlencode(
            {"next": f"/product/{pid}", "err": "login-required"}))
    row = visible_product(request, pid)
    if row is None or not row["enabled"]:
        return missing(request, "product")
    qty = parse_int(request.field("quantity", "1"))
    if not qty:
        return redirect(f"/product/{pid}?err=quantity")
    have = request.db.execute("SELECT quantity FROM cart_items WHERE user_id = ? AND"
                              " product_id = ?", (request.user["id"], pid)).fetchone()
    total = qty + (have[0] if have else 0)
    if total > row["stock"]:
        return redirect(f"/product/{pid}?err=stock")
    request.db.execute("INSERT INTO cart_items VALUES (?, ?, ?) ON CONFLICT (user_id,"
                       " product_id) DO UPDATE SET quantity = excluded.quantity",
                       (request.user["id"], pid, total))
    return redirect(f"/product/{pid}?msg=added")


@SITE.route("/cart")
def cart(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    subtotal, discount, coupon = cart_totals(request)
    return page(request, "cart", "Shopping cart", lines=cart_lines(request), subtotal=subtotal,
                discount=discount, coupon=coupon)


@SITE.route("/cart/update", methods=("POST",))
def cart_update(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    for line in cart_lines(request):
        raw = request.field(f"qty_{line['product_id']}", str(line["quantity"]))
        qty = parse_int(raw)
        if qty is None:
            return redirect("/cart?err=quantity")
        if qty > line["stock"]:
            return redirect("/cart?err=stock")
    for line in cart_lines(request):
        qty = parse_int(request.field(f"qty_{line['product_id']}", str(line["quantity"])))
        if qty == 0:
            request.db.execute("DELETE FROM cart_items WHERE user_id = ? AND product_id = ?",
                               (request.user["id"], line["product_id"]))
        else:
            request.db.execute("UPDATE cart_items SET quantity = ? WHERE user_id = ? AND"
                               " product_id = ?", (qty, request.user["id"], line["product_id"]))
    return redirect("/cart?msg=cart-updated")


@SITE.route("/cart/remove", methods=("POST",))
def cart_remove(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    request.db.execute("DELETE FROM cart_items WHERE user_id = ? AND product_id = ?",
                       (request.user["id"], parse_int(request.field("product_id"))))
    return redirect("/cart?msg=removed")


@SITE.route("/cart/coupon", methods=("POST",))
def cart_coupon_apply(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    code = request.field("coupon").upper()
    row = request.db.execute("SELECT * FROM coupons WHERE code = ?", (code,)).fetchone()
    if row is None:
        return redirect("/cart?err=coupon-invalid")
    if not row["active"]:
        return redirect("/cart?err=coupon-expired")
    request.db.execute("INSERT OR REPLACE INTO cart_coupons VALUES (?, ?)",
                       (request.user["id"], code))
    return redirect("/cart?msg=coupon-applied")


@SITE.route("/cart/coupon/remove", methods=("POST",))
def cart_coupon_remove(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    request.db.execute("DELETE FROM cart_coupons WHERE user_id = ?", (request.user["id"],))
    return redirect("/cart?msg=coupon-removed")


def checkout_page(request: Request, values: dict[str, str], errors: list[str]) -> Response:
    subtotal, discount, coupon = cart_totals(request)
    methods = [(key, f"{label} ({money(cents)})") for key, (label, cents) in SHIPPING.items()]
    return page(request, "checkout", "Checkout", 200, errors, lines=cart_lines(request),
                subtotal=subtotal, discount=discount, coupon=coupon, methods=methods,
                values=values)


@SITE.route("/checkout", methods=("GET", "POST"))
def checkout(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    lines = cart_lines(request)
    if not lines:
        return redirect("/cart?err=cart-empty")
    db, user = request.db, request.user
    if request.method == "GET":
        address = db.execute("SELECT * FROM addresses WHERE user_id = ?"
                             " ORDER BY is_default DESC, id LIMIT 1", (user["id"],)).fetchone()
        values = ({k: address[k] for k in ("full_name", "street", "city", "zip")} if address
                  else {"full_name": user["full_name"]})
        return checkout_page(request, values, [])
    values = {k: request.field(k) for k in ("full_name", "street", "city", "zip", "shipping")}
    errors = [f"{label} is required." for key, label in
              (("full_name", "Full name"), ("street", "Street address"), ("city", "City"),
               ("zip", "ZIP code")) if not values[key]]
    if values["zip"] and not re.fullmatch(r"\d{5}", values["zip"]):
        errors.append("ZIP code must be 5 digits.")
    if values["shipping"] not in SHIPPING:
        errors.append("Please choose a shipping method.")
    for line in lines:
        if not line["enabled"]:
            errors.append(f"{line['name']} is no longer available.")
        elif line["quantity"] > line["stock"]:
            errors.append(f"Only {line['stock']} of {line['name']} left in stock.")
    if errors:
        return checkout_page(request, values, errors)
    subtotal, discount, coupon = cart_totals(request)
    shipping = SHIPPING[values["shipping"]][1]
    cursor = db.execute(
        "INSERT INTO orders (user_id, created, status, full_name, street, city, zip,"
        " shipping_method, coupon_code, subtotal, discount, shipping, total)"
        " VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (user["id"], NOW, values["full_name"], values["street"], values["city"], values["zip"],
         values["shipping"], coupon["code"] if coupon else None, subtotal, discount, shipping,
         subtotal - discount + shipping))
    oid = cursor.lastrowid
    for line in lines:
        db.execute("INSERT INTO order_items (order_id, product_id, name, price, quantity)"
                   " VALUES (?, ?, ?, ?, ?)",
                   (oid, line["product_id"], line["name"], line["price"], line["quantity"]))
        db.execute("UPDATE products SET stock = stock - ? WHERE id = ?",
                   (line["quantity"], line["product_id"]))
    db.execute("DELETE FROM cart_items WHERE user_id = ?", (user["id"],))
    db.execute("DELETE FROM cart_coupons WHERE user_id = ?", (user["id"],))
    return redirect(f"/orders/{oid}?placed=1")


# ---- orders -------------------------------------------------------------------------------

def restock(db: sqlite3.Connection, oid: int, sign: int) -> None:
    """Put an order's units back in stock (``sign`` 1) or take them out again (-1)."""
    for item in db.execute("SELECT product_id, quantity FROM order_items WHERE order_id = ?",
                           (oid,)).fetchall():
        db.execute("UPDATE products SET stock = MAX(0, stock + ?) WHERE id = ?",
                   (sign * item["quantity"], item["product_id"]))


def order_context(request: Request, order: sqlite3.Row) -> dict[str, object]:
    """What ``order_details`` (shop/macros.html) shows of ``order``: its items, its history."""
    return {"order": order,
            "items": request.db.execute("SELECT * FROM order_items WHERE order_id = ?"
                                        " ORDER BY id", (order["id"],)).fetchall(),
            "comments": request.db.execute("SELECT * FROM order_comments WHERE order_id = ?"
                                           " ORDER BY created, id", (order["id"],)).fetchall()}


@SITE.route("/orders")
def orders(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    rows = request.db.execute("SELECT * FROM orders WHERE user_id = ? ORDER BY created DESC",
                              (request.user["id"],)).fetchall()
    return page(request, "orders", "My orders", rows=rows)


def own_order(request: Request, oid: int) -> sqlite3.Row | None:
    return request.db.execute("SELECT * FROM orders WHERE id = ? AND user_id = ?",
                              (oid, request.user["id"])).fetchone()


@SITE.route("/orders/{oid:int}")
def order_page(request: Request, oid: int) -> Response:
    if request.user is None:
        return login_first(request)
    order = own_order(request, oid)
    if order is None:
        return missing(request, "order")
    return page(request, "order", f"Order #{oid}", placed=bool(request.arg("placed")),
                **order_context(request, order))


@SITE.route("/orders/{oid:int}/cancel", methods=("POST",))
def cancel_order(request: Request, oid: int) -> Response:
    if request.user is None:
        return login_first(request)
    order = own_order(request, oid)
    if order is None:
        return missing(request, "order")
    if order["status"] != "pending":
        return redirect(f"/orders/{oid}?err=not-pending")
    request.db.execute("UPDATE orders SET status = 'cancelled' WHERE id = ?", (oid,))
    restock(request.db, oid, 1)
    request.db.execute("INSERT INTO order_comments (order_id, author, created, body)"
                       " VALUES (?, ?, ?, 'Cancelled by the customer.')",
                       (oid, request.user["username"], NOW))
    return redirect(f"/orders/{oid}?msg=cancelled")


# ---- wishlist -----------------------------------------------------------------------------

@SITE.route("/wishlist")
def wishlist(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    rows = request.db.execute(
        "SELECT p.* FROM wishlist w JOIN products p ON p.id = w.product_id"
        " WHERE w.user_id = ? ORDER BY w.added", (request.user["id"],)).fetchall()
    return page(request, "wishlist", "My wishlist", rows=rows)


def _back(request: Request, default: str, message: str) -> Response:
    target = request.field("next")
    if not target.startswith("/") or target.startswith("//"):
        target = default
    return redirect(f"{target}?msg={message}")


@SITE.route("/wishlist/add", methods=("POST",))
def wishlist_add(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    row = visible_product(request, parse_int(request.field("product_id")) or 0)
    if row is None:
        return missing(request, "product")
    request.db.execute("INSERT OR IGNORE INTO wishlist VALUES (?, ?, ?)",
                       (request.user["id"], row["id"], NOW))
    return _back(request, "/wishlist", "wishlist-added")


@SITE.route("/wishlist/remove", methods=("POST",))
def wishlist_remove(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    request.db.execute("DELETE FROM wishlist WHERE user_id = ? AND product_id = ?",
                       (request.user["id"], parse_int(request.field("product_id"))))
    return _back(request, "/wishlist", "wishlist-removed")


@SITE.route("/wishlist/move", methods=("POST",))
def wishlist_move(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    row = visible_product(request, parse_int(request.field("product_id")) or 0)
    if row is None or not row["enabled"]:
        return missing(request, "product")
    uid = request.user["id"]
    have = request.db.execute("SELECT quantity FROM cart_items WHERE user_id = ? AND"
                              " product_id = ?", (uid, row["id"])).fetchone()
    if (have[0] if have else 0) + 1 > row["stock"]:
        return redirect("/wishlist?err=stock")
    request.db.execute("INSERT INTO cart_items VALUES (?, ?, 1) ON CONFLICT (user_id,"
                       " product_id) DO UPDATE SET quantity = quantity + 1", (uid, row["id"]))
    request.db.execute("DELETE FROM wishlist WHERE user_id = ? AND product_id = ?",
                       (uid, row["id"]))
    return redirect("/wishlist?msg=wishlist-moved")


# ---- account ------------------------------------------------------------------------------

def account_page(request: Request, errors: list[str], values: dict[str, str] | None = None
                 ) -> Response:
    user = request.user
    values = values or {"full_name": user["full_name"], "email": user["email"],
                        "newsletter": "1" if user["newsletter"] else ""}
    return page(request, "account", "My account", 200, errors, values=values)


@SITE.route("/account", methods=("GET", "POST"))
def account(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    if request.method == "GET":
        return account_page(request, [])
    values = {k: request.field(k) for k in ("full_name", "email", "newsletter")}
    errors = []
    if not values["full_name"]:
        errors.append("Full name is required.")
    if not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", values["email"]):
        errors.append("Please enter a valid email address.")
    elif request.db.execute("SELECT 1 FROM users WHERE email = ? AND id != ?",
                            (values["email"], request.user["id"])).fetchone():
        errors.append("Another account already uses this email address.")
    if errors:
        return account_page(request, errors, values)
    request.db.execute("UPDATE users SET full_name = ?, email = ?, newsletter = ? WHERE id = ?",
                       (values["full_name"], values["email"], 1 if values["newsletter"] else 0,
                        request.user["id"]))
    return redirect("/account?msg=settings-saved")


@SITE.route("/account/password", methods=("POST",))
def change_password(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    current = request.raw_field("current_password")
    new = request.raw_field("new_password")
    confirm = request.raw_field("confirm_password")
    errors = []
    if current != request.user["password"]:
        errors.append("The current password is incorrect.")
    if len(new) < 8:
        errors.append("The new password must be at least 8 characters long.")
    elif new != confirm:
        errors.append("The new passwords do not match.")
    if errors:
        return account_page(request, errors)
    request.db.execute("UPDATE users SET password = ? WHERE id = ?", (new, request.user["id"]))
    return redirect("/account?msg=password-changed")


def addresses_page(request: Request, errors: list[str], values: dict[str, str]) -> Response:
    rows = request.db.execute("SELECT * FROM addresses WHERE user_id = ? ORDER BY id",
                              (request.user["id"],)).fetchall()
    return page(request, "addresses", "Address book", 200, errors, rows=rows, values=values)


@SITE.route("/account/addresses", methods=("GET", "POST"))
def addresses(request: Request) -> Response:
    if request.user is None:
        return login_first(request)
    if request.method == "GET":
        return addresses_page(request, [], {"full_name": request.user["full_name"]})
    values = {k: request.field(k) for k in ("full_name", "street", "city", "zip", "is_default")}
    errors = [f"{label} is required." for key, label in
              (("full_name", "Full name"), ("street", "Street address"), ("city", "City"),
               ("zip", "ZIP code")) if not values[key]]
    if values["zip"] and not re.fullmatch(r"\d{5}", values["zip"]):
        errors.append("ZIP code must be 5 digits.")
    if errors:
        return addresses_page(request, errors, values)
    uid = request.user["id"]
    has_default = request.db.execute("SELECT 1 FROM addresses WHERE user_id = ? AND"
                                     " is_default = 1", (uid,)).fetchone()
    make_default = bool(values["is_default"]) or not has_default
    if make_default:
        request.db.execute("UPDATE addresses SET is_default = 0 WHERE user_id = ?", (uid,))
    request.db.execute("INSERT INTO addresses (user_id, full_name, street, city, zip, is_default)"
                       " VALUES (?, ?, ?, ?, ?, ?)",
                       (uid, values["full_name"], values["street"], values["city"],
                        values["zip"], 1 if make_default else 0))
    return redirect("/account/addresses?msg=address-added")


@SITE.route("/account/addresses/{aid:int}/default", methods=("POST",))
def address_default(request: Request, aid: int) -> Response:
    if request.user is None:
        return login_first(request)
    uid = request.user["id"]
    if not request.db.execute("SELECT 1 FROM addresses WHERE id = ? AND user_id = ?",
                              (aid, uid)).fetchone():
        return missing(request, "address")
    request.db.execute("UPDATE addresses SET is_default = (id = ?) WHERE user_id = ?",
                       (aid, uid))
    return redirect("/account/addresses?msg=address-default")


@SITE.route("/account/addresses/{aid:int}/delete", methods=("POST",))
def address_delete(request: Request, aid: int) -> Response:
    if request.user is None:
        return login_first(request)
    uid = request.user["id"]
    row = request.db.execute("SELECT * FROM addresses WHERE id = ? AND user_id = ?",
                             (aid, uid)).fetchone()
    if row is None:
        return missing(request, "address")
    request.db.execute("DELETE FROM addresses WHERE id = ?", (aid,))
    if row["is_default"]:
        request.db.execute("UPDATE addresses SET is_default = 1 WHERE id = (SELECT MIN(id)"
                           " FROM addresses WHERE user_id = ?)", (uid,))
    return redirect("/account/addresses?msg=address-deleted")


# ---- logging in ---------------------------------------------------------------------------

def safe_next(target: str) -> str:
    return target if target.startswith("/") and not target.startswith("//") else "/"


@SITE.route("/login", methods=("GET", "POST"))
def login(request: Request) -> Response:
    errors = []
    target = safe_next(request.field("next") or request.arg("next") or "/")
    if request.method == "POST":
        user = request.db.execute("SELECT * FROM users WHERE username = ?",
                                  (request.field("username"),)).fetchone()
        if user is not None and user["password"] == request.raw_field("password"):
            request.log_in(user["id"])
            return redirect(target)
        errors.append("Invalid username or password.")
    return page(request, "login", "Log in", 200, errors, target=target)


@SITE.route("/logout")
def logout(request: Request) -> Response:
    request.log_out()
    return redirect("/?msg=logged-out")


# ---- admin --------------------------------------------------------------------------------


def spent_sql() -> str:
    return ("SELECT u.*, COUNT(o.id) AS order_count, COALESCE(SUM(CASE WHEN o.status !="
            " 'cancelled' THEN o.total END), 0) AS spent FROM users u LEFT JOIN orders o"
            " ON o.user_id = u.id WHERE u.is_admin = 0 GROUP BY u.id")


ORDER_ROWS = ("SELECT o.*, u.full_name AS customer, (SELECT SUM(quantity) FROM order_items i"
              " WHERE i.order_id = o.id) AS units FROM orders o JOIN users u ON u.id = o.user_id")


@SITE.route("/admin")
def admin_home(request: Request) -> Response:
    if not is_admin(request):
        return forbidden(request)
    db = request.db
    orders_count, revenue = db.execute(
        "SELECT COUNT(*), COALESCE(SUM(CASE WHEN status != 'cancelled' THEN total END), 0)"
        " FROM orders").fetchone()
    pending = db.execute("SELECT COUNT(*) FROM orders WHERE status = 'pending'").fetchone()[0]
    customers = db.execute("SELECT COUNT(*) FROM users WHERE is_admin = 0").fetchone()[0]
    latest = db.execute(ORDER_ROWS + " ORDER BY o.created DESC LIMIT 5").fetchall()
    return page(request, "admin_home", "Admin: Dashboard", orders_count=orders_count,
                revenue=revenue, pending=pending, customers=customers, latest=latest)


@SITE.route("/admin/products")
def admin_products(request: Request) -> Response:
    if not is_admin(request):
        return forbidden(request)
    query = request.arg("name")
    pattern = "%" + re.sub(r"([\\%_])", r"\\\1", query) + "%"
    rows = request.db.execute(
        "SELECT p.*, c.name AS category FROM products p JOIN categories c ON c.id ="
        " p.category_id WHERE p.name LIKE ? ESCAPE '\\' ORDER BY p.id", (pattern,)).fetchall()
    return page(request, "admin_products", "Admin: Products", query=query, rows=rows)


def admin_product_page(request: Request, row: sqlite3.Row, values: dict[str, str],
                       errors: list[str]) -> Response:
    return page(request, "admin_product", f"Admin: {row['name']}", 200, errors, row=row,
                values=values)


@SITE.route("/admin/products/{pid:int}", methods=("GET", "POST"))
def admin_product(request: Request, pid: int) -> Response:
    if not is_admin(request):
        return forbidden(request)
    row = request.db.execute("SELECT * FROM products WHERE id = ?", (pid,)).fetchone()
    if row is None:
        return missing(request, "product")
    if request.method == "GET":
        values = {"price": f"{row['price'] // 100}.{row['price'] % 100:02d}",
                  "stock": str(row["stock"]), "enabled": "1" if row["enabled"] else "",
                  "featured": "1" if row["featured"] else ""}
        return admin_product_page(request, row, values, [])
    values = {k: request.field(k) for k in ("price", "stock", "enabled", "featured")}
    price, stock = parse_money(values["price"]), parse_int(values["stock"])
    errors = []
    if price is None or price <= 0:
        errors.append("Price must be an amount of money greater than zero, like 12.99.")
    if stock is None:
        errors.append("Stock must be a whole number of 0 or more.")
    if errors:
        return admin_product_page(request, row, values, errors)
    request.db.execute("UPDATE products SET price = ?, stock = ?, enabled = ?, featured = ?"
                       " WHERE id = ?", (price, stock, 1 if values["enabled"] else 0,
                                         1 if values["featured"] else 0, pid))
    return redirect(f"/admin/products/{pid}?msg=product-saved")


@SITE.route("/admin/orders")
def admin_orders(request: Request) -> Response:
    if not is_admin(request):
        return forbidden(request)
    status = request.arg("status")
    if status in STATUSES:
        rows = request.db.execute(ORDER_ROWS + " WHERE o.status = ? ORDER BY o.created DESC",
                                  (status,)).fetchall()
    else:
        status = ""
        rows = request.db.execute(ORDER_ROWS + " ORDER BY o.created DESC").fetchall()
    options = [("", "All statuses")] + [(s, s.capitalize()) for s in STATUSES]
    return page(request, "admin_orders", "Admin: Orders", status=status, rows=rows,
                options=options)


@SITE.route("/admin/orders/{oid:int}")
def admin_order(request: Request, oid: int) -> Response:
    if not is_admin(request):
        return forbidden(request)
    order = request.db.execute(ORDER_ROWS + " WHERE o.id = ?", (oid,)).fetchone()
    if order is None:
        return missing(request, "order")
    email = request.db.execute("SELECT email FROM users WHERE id = ?",
                               (order["user_id"],)).fetchone()[0]
    return page(request, "admin_order", f"Admin: Order #{oid}", email=email,
                options=[(s, s.capitalize()) for s in STATUSES],
                **order_context(request, order))


@SITE.route("/admin/orders/{oid:int}/status", methods=("POST",))
def admin_order_status(request: Request, oid: int) -> Response:
    if not is_admin(request):
        return forbidden(request)
    order = request.db.execute("SELECT * FROM orders WHERE id = ?", (oid,)).fetchone()
    if order is None:
        return missing(request, "order")
    status = request.field("status")
    if status not in STATUSES:
        return redirect(f"/admin/orders/{oid}?err=status")
    if status != order["status"]:
        if status == "cancelled":
            restock(request.db, oid, 1)
        elif order["status"] == "cancelled":
            restock(request.db, oid, -1)
        request.db.execute("UPDATE orders SET status = ? WHERE id = ?", (status, oid))
        request.db.execute(
            "INSERT INTO order_comments (order_id, author, created, body) VALUES (?, ?, ?, ?)",
            (oid, request.user["username"], NOW,
             f"Status changed from {order['status']} to {status}."))
    return redirect(f"/admin/orders/{oid}?msg=status-updated")


@SITE.route("/admin/orders/{oid:int}/comment", methods=("POST",))
def admin_order_comment(request: Request, oid: int) -> Response:
    if not is_admin(request):
        return forbidden(request)
    if not request.db.execute("SELECT 1 FROM orders WHERE id = ?", (oid,)).fetchone():
        return missing(request, "order")
    text = request.field("comment")
    if not text:
        return redirect(f"/admin/orders/{oid}?err=comment-empty")
    request.db.execute("INSERT INTO order_comments (order_id, author, created, body)"
                       " VALUES (?, ?, ?, ?)", (oid, request.user["username"], NOW, text))
    return redirect(f"/admin/orders/{oid}?msg=comment-added")


@SITE.route("/admin/customers")
def admin_customers(request: Request) -> Response:
    if not is_admin(request):
        return forbidden(request)
    rows = request.db.execute(spent_sql() + " ORDER BY u.full_name").fetchall()
    return page(request, "admin_customers", "Admin: Customers", rows=rows)


@SITE.route("/admin/reports/bestsellers")
def admin_bestsellers(request: Request) -> Response:
    if not is_admin(request):
        return forbidden(request)
    db = request.db
    months = [row[0] for row in db.execute(
        "SELECT DISTINCT substr(created, 1, 7) FROM orders WHERE status != 'cancelled'"
        " ORDER BY 1 DESC")]
    period = request.arg("period")
    if period not in months:
        period = ""
    rows = db.execute(
        "SELECT i.product_id, p.name, p.sku, SUM(i.quantity) AS units,"
        " SUM(i.quantity * i.price) AS revenue FROM order_items i"
        " JOIN orders o ON o.id = i.order_id JOIN products p ON p.id = i.product_id"
        " WHERE o.status != 'cancelled' AND (? = '' OR substr(o.created, 1, 7) = ?)"
        " GROUP BY i.product_id ORDER BY units DESC, revenue DESC, p.name",
        (period, period)).fetchall()
    options = [("", "All time")] + [(m, month_label(m)) for m in months]
    return page(request, "admin_bestsellers", "Admin: Bestsellers report", period=period,
                rows=rows, options=options)


@SITE.route("/admin/reports/low-stock")
def admin_low_stock(request: Request) -> Response:
    if not is_admin(request):
        return forbidden(request)
    threshold = parse_int(request.arg("threshold", "5"))
    threshold = 5 if threshold is None else threshold
    rows = request.db.execute("SELECT * FROM products WHERE stock < ? ORDER BY stock, name",
                              (threshold,)).fetchall()
    return page(request, "admin_low_stock", "Admin: Low stock report", threshold=threshold,
                rows=rows)
