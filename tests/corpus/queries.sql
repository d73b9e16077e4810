-- Realistic SELECTs for tests/integration/test_corpus.py. One statement per ';'.
-- A line "-- params: [..]" right before a statement gives its $n values (JSON).
-- ===================== news site =====================
SELECT id, title, score FROM stories WHERE id = 3;
SELECT id, title, url FROM stories WHERE author_id = 2 ORDER BY created_at DESC, id DESC LIMIT 5;
SELECT * FROM stories WHERE id = 7;
SELECT s.id, s.title, u.username FROM stories s JOIN users u ON u.id = s.author_id WHERE s.id = 4;
SELECT s.id, s.title, u.username AS author FROM stories s INNER JOIN users u ON s.author_id = u.id WHERE u.id = 3;
SELECT s.id, count(v.id) AS votes FROM stories s LEFT JOIN votes v ON v.story_id = s.id GROUP BY s.id;
SELECT story_id, count(*) FROM votes GROUP BY story_id;
SELECT story_id, sum(value) AS total FROM votes GROUP BY story_id;
SELECT count(*) FROM votes WHERE story_id = 5;
SELECT sum(value) FROM votes WHERE story_id = 6;
SELECT story_id, count(*) AS n FROM votes WHERE value = 1 GROUP BY story_id;
SELECT story_id, count(*) AS n FROM votes WHERE value = -1 GROUP BY story_id HAVING count(*) > 1;
SELECT s.id, s.title, s.score FROM stories s WHERE s.published ORDER BY s.score DESC, s.id LIMIT 10;
SELECT id, title FROM stories WHERE published = true AND score > 10;
SELECT id, title FROM stories WHERE NOT published;
SELECT id, title FROM stories WHERE url IS NULL;
SELECT id, title, url FROM stories WHERE url IS NOT NULL AND author_id = 1;
SELECT id FROM stories WHERE title LIKE 'How%';
SELECT id FROM stories WHERE title ILIKE '%rust%';
SELECT id FROM stories WHERE title NOT LIKE '%a%';
SELECT id, score FROM stories WHERE score BETWEEN 5 AND 20;
SELECT id, score FROM stories WHERE score NOT BETWEEN 5 AND 20;
SELECT id FROM stories WHERE author_id IN (1, 2, 3);
SELECT id FROM stories WHERE author_id NOT IN (1, 2);
SELECT id, title FROM stories WHERE (score > 50 OR author_id = 1) AND published;
SELECT c.id, c.body, u.username FROM comments c JOIN users u ON u.id = c.author_id WHERE c.story_id = 2;
SELECT c.id, c.body FROM comments c WHERE c.story_id = 3 ORDER BY c.created_at, c.id;
SELECT c.id, c.body, c.score FROM comments c WHERE c.story_id = 1 ORDER BY c.score DESC NULLS LAST, c.id LIMIT 3;
SELECT story_id, count(*) AS comments FROM comments GROUP BY story_id;
SELECT story_id, count(*) FROM comments WHERE parent_id IS NULL GROUP BY story_id;
SELECT count(*) FROM comments WHERE story_id = 4;
SELECT count(parent_id) FROM comments WHERE story_id = 4;
SELECT author_id, count(DISTINCT story_id) AS stories FROM comments GROUP BY author_id;
SELECT author_id, max(score) AS best, min(score) AS worst FROM comments GROUP BY author_id;
SELECT story_id, avg(score) FROM comments GROUP BY story_id;
SELECT s.id, s.title, count(c.id) AS ncomments FROM stories s LEFT JOIN comments c ON c.story_id = s.id WHERE s.author_id = 2 GROUP BY s.id, s.title;
SELECT u.id, u.username, count(s.id) FROM users u LEFT JOIN stories s ON s.author_id = u.id GROUP BY u.id, u.username;
SELECT u.username, s.title FROM users u, stories s WHERE s.author_id = u.id AND u.karma > 100;
SELECT u.username, s.title, c.body FROM users u JOIN stories s ON s.author_id = u.id JOIN comments c ON c.story_id = s.id WHERE s.id = 3;
SELECT s.title, t.name FROM stories s JOIN story_tags st ON st.story_id = s.id JOIN tags t ON t.id = st.tag_id WHERE t.name = 'rust';
SELECT t.name, count(*) AS n FROM story_tags st JOIN tags t ON t.id = st.tag_id GROUP BY t.name;
SELECT s.id, s.title FROM stories s JOIN story_tags st ON st.story_id = s.id WHERE st.tag_id = 2 ORDER BY s.id DESC LIMIT 5;
SELECT id, username, karma FROM users WHERE id = 1;
SELECT id, username FROM users WHERE username = 'alice';
SELECT id, username FROM users WHERE is_admin;
SELECT id, username, karma FROM users ORDER BY karma DESC, id LIMIT 5;
SELECT username, email FROM users WHERE email LIKE '%@example.com';
SELECT username, lower(email) AS email FROM users WHERE id = 2;
SELECT upper(username), length(username) FROM users WHERE id = 3;
SELECT username || ' <' || email || '>' AS contact FROM users WHERE id = 4;
SELECT id, karma * 2 AS double_karma, karma + 10, karma - 1 FROM users WHERE id = 5;
SELECT id, karma / 3, karma % 3 FROM users;
SELECT id, CASE WHEN karma > 100 THEN 'high' WHEN karma > 10 THEN 'mid' ELSE 'low' END AS level FROM users;
SELECT id, coalesce(email, 'none') FROM users;
SELECT id, coalesce(url, title) AS link FROM stories WHERE author_id = 3;
SELECT id, nullif(score, 0) FROM comments WHERE story_id = 2;
SELECT DISTINCT author_id FROM stories;
SELECT DISTINCT story_id FROM votes WHERE value = 1;
SELECT DISTINCT s.author_id FROM stories s JOIN votes v ON v.story_id = s.id;
SELECT id, title FROM stories WHERE author_id = 1 UNION ALL SELECT id, body FROM comments WHERE author_id = 1;
SELECT id FROM stories UNION ALL SELECT id FROM comments;
SELECT story_id, sum(value) AS score FROM votes GROUP BY story_id HAVING sum(value) > 0;
SELECT story_id, sum(value) AS score FROM votes GROUP BY story_id ORDER BY score DESC, story_id LIMIT 5;
SELECT s.id, s.title, sum(v.value) AS score FROM stories s JOIN votes v ON v.story_id = s.id GROUP BY s.id, s.title ORDER BY score DESC, s.id LIMIT 10;
SELECT user_id, count(*) FROM votes GROUP BY user_id HAVING count(*) >= 3;
SELECT v.user_id, count(*) FROM votes v JOIN stories s ON s.id = v.story_id WHERE s.author_id = 2 GROUP BY v.user_id;
SELECT count(*) FROM stories;
SELECT count(*), sum(score), min(score), max(score) FROM stories;
SELECT max(created_at) FROM comments WHERE story_id = 1;
SELECT min(created_at) FROM stories WHERE author_id = 2;
SELECT avg(karma) FROM users;
SELECT id, title FROM stories WHERE created_at > '2024-03-01';
SELECT id, title FROM stories WHERE created_at >= '2024-01-15 00:00:00' AND created_at < '2024-02-01';
SELECT sub.id, sub.title FROM (SELECT id, title, score FROM stories WHERE published) sub WHERE sub.score > 5;
SELECT x.author_id, x.n FROM (SELECT author_id, count(*) AS n FROM stories GROUP BY author_id) x WHERE x.n > 1;
SELECT u.username, x.n FROM users u JOIN (SELECT author_id, count(*) AS n FROM stories GROUP BY author_id) x ON x.author_id = u.id;
WITH top AS (SELECT id, title FROM stories WHERE score > 20) SELECT id, title FROM top;
WITH counts AS (SELECT story_id, count(*) AS n FROM votes GROUP BY story_id) SELECT s.title, counts.n FROM stories s JOIN counts ON counts.story_id = s.id;
-- params: [2]
SELECT id, title FROM stories WHERE author_id = $1 ORDER BY id DESC LIMIT 3;
-- params: [3]
SELECT id, body FROM comments WHERE story_id = $1;
-- params: [1, 2]
SELECT id FROM stories WHERE author_id = $1 AND id = $2;
-- params: [4]
SELECT count(*) FROM votes WHERE story_id = $1;
SELECT id, title FROM stories WHERE now() > created_at;
SELECT id, title FROM stories ORDER BY random() LIMIT 1;
SELECT id FROM stories WHERE id = 1 FOR UPDATE;
SELECT id, row_number() OVER (ORDER BY score) FROM stories;
SELECT id FROM stories ORDER BY id LIMIT 10 OFFSET 10;
SELECT id FROM stories s WHERE EXISTS (SELECT 1 FROM votes v WHERE v.story_id = s.id);
SELECT id FROM stories WHERE author_id IN (SELECT id FROM users WHERE is_admin);
SELECT id, (SELECT count(*) FROM votes v WHERE v.story_id = s.id) FROM stories s;
SELECT id FROM stories LIMIT 5;
SELECT author_id FROM stories UNION SELECT author_id FROM comments;
SELECT id, title FROM stories WHERE title > 'M';
SELECT id, title FROM stories ORDER BY title, id;
SELECT title FROM stories ORDER BY title DESC, id LIMIT 4;
SELECT min(title), max(title) FROM stories;
SELECT s.id, u.username FROM stories s LEFT JOIN users u ON u.id = s.author_id;
SELECT s.id, u.username FROM stories s LEFT JOIN users u ON u.id = s.author_id AND u.is_admin;
SELECT u.id, v.story_id FROM users u LEFT JOIN votes v ON v.user_id = u.id WHERE v.story_id IS NULL;
SELECT u.id FROM users u RIGHT JOIN stories s ON s.author_id = u.id;
SELECT u.id FROM users u FULL JOIN stories s ON s.author_id = u.id;
SELECT u.id, s.id FROM users u CROSS JOIN tags s;
SELECT u.id, s.id FROM users u JOIN stories s ON s.author_id > u.id;
-- ===================== shop =====================
SELECT id, name, price FROM products WHERE id = 5;
SELECT id, name, price FROM products WHERE category_id = 2 AND NOT discontinued ORDER BY price, id;
SELECT id, name, price FROM products WHERE category_id = 3 ORDER BY price DESC, id LIMIT 3;
SELECT p.id, p.name, c.name AS category FROM products p JOIN categories c ON c.id = p.category_id WHERE p.id = 2;
SELECT c.name, count(p.id) AS products FROM categories c LEFT JOIN products p ON p.category_id = c.id GROUP BY c.id, c.name;
SELECT category_id, min(price), max(price), avg(price) FROM products GROUP BY category_id;
SELECT category_id, sum(stock) FROM products GROUP BY category_id;
SELECT category_id, count(*) FROM products WHERE stock = 0 GROUP BY category_id;
SELECT id, name FROM products WHERE price BETWEEN 10 AND 50;
SELECT id, name FROM products WHERE price < 9.99;
SELECT id, name, price * 1.2 AS gross FROM products WHERE category_id = 1;
SELECT id, name, stock * price AS value FROM products WHERE category_id = 4;
SELECT id, name FROM products WHERE name ILIKE '%pro%';
SELECT id, name FROM products WHERE discontinued = false AND stock > 0 AND category_id IN (1, 2);
SELECT o.id, o.status, o.total FROM orders o WHERE o.customer_id = 3 ORDER BY o.placed_on DESC, o.id DESC LIMIT 5;
SELECT o.id, o.total FROM orders o WHERE o.customer_id = 4;
SELECT status, count(*) FROM orders GROUP BY status;
SELECT customer_id, sum(total) AS spent FROM orders GROUP BY customer_id;
SELECT customer_id, sum(total) AS spent FROM orders WHERE status = 'paid' GROUP BY customer_id HAVING sum(total) > 100;
SELECT customer_id, count(*) AS n, max(placed_on) AS last_order FROM orders GROUP BY customer_id;
SELECT c.name, o.id, o.total FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.id = 2;
SELECT c.name, count(o.id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.id, c.name;
SELECT c.country, count(*) FROM customers c GROUP BY c.country;
SELECT c.country, count(DISTINCT o.customer_id) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.country;
SELECT oi.product_id, sum(oi.quantity) AS sold FROM order_items oi GROUP BY oi.product_id;
SELECT oi.order_id, sum(oi.quantity * oi.unit_price) AS amount FROM order_items oi GROUP BY oi.order_id;
SELECT oi.product_id, p.name, oi.quantity FROM order_items oi JOIN products p ON p.id = oi.product_id WHERE oi.order_id = 3;
SELECT p.name, sum(oi.quantity) FROM products p JOIN order_items oi ON oi.product_id = p.id GROUP BY p.id, p.name ORDER BY sum(oi.quantity) DESC, p.id LIMIT 5;
SELECT o.id, c.name, p.name, oi.quantity FROM orders o JOIN customers c ON c.id = o.customer_id JOIN order_items oi ON oi.order_id = o.id JOIN products p ON p.id = oi.product_id WHERE o.id = 2;
SELECT p.category_id, sum(oi.quantity * oi.unit_price) FROM order_items oi JOIN products p ON p.id = oi.product_id GROUP BY p.category_id;
SELECT r.rating, count(*) FROM reviews r WHERE r.product_id = 3 GROUP BY r.rating;
SELECT product_id, avg(rating) AS stars, count(*) AS reviews FROM reviews GROUP BY product_id;
SELECT product_id, avg(rating) FROM reviews GROUP BY product_id HAVING count(*) >= 2;
SELECT r.id, r.body, c.name FROM reviews r JOIN customers c ON c.id = r.customer_id WHERE r.product_id = 4 ORDER BY r.id;
SELECT id, rating, coalesce(body, '') FROM reviews WHERE product_id = 1;
SELECT p.id, p.name, avg(r.rating) FROM products p LEFT JOIN reviews r ON r.product_id = p.id WHERE p.category_id = 2 GROUP BY p.id, p.name;
SELECT DISTINCT category_id FROM products WHERE NOT discontinued;
SELECT DISTINCT c.country FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.status = 'shipped';
SELECT id, name FROM customers WHERE vip;
SELECT id, name FROM customers WHERE country = 'FR';
SELECT id, name FROM customers WHERE country IS NULL;
SELECT id, name, CASE WHEN vip THEN 'vip' ELSE 'regular' END AS tier FROM customers;
SELECT id, placed_on FROM orders WHERE placed_on >= '2024-02-01' AND placed_on < '2024-03-01';
SELECT id FROM orders WHERE status IN ('paid', 'shipped') AND customer_id = 1;
SELECT id FROM orders WHERE status <> 'cancelled' AND total > 50;
SELECT id, total FROM orders WHERE total IS NULL;
SELECT count(*) FROM orders WHERE customer_id = 2;
SELECT sum(total) FROM orders WHERE customer_id = 3;
SELECT max(total), min(total) FROM orders WHERE status = 'paid';
SELECT c.name, sub.spent FROM customers c JOIN (SELECT customer_id, sum(total) AS spent FROM orders GROUP BY customer_id) sub ON sub.customer_id = c.id WHERE c.vip;
WITH recent AS (SELECT id, customer_id FROM orders WHERE placed_on > '2024-03-15') SELECT c.name, recent.id FROM recent JOIN customers c ON c.id = recent.customer_id;
SELECT id, name FROM categories WHERE parent_id = 1;
SELECT c.id, c.name, p.name AS parent FROM categories c LEFT JOIN categories p ON p.id = c.parent_id;
SELECT id, name FROM products WHERE category_id = 2 UNION ALL SELECT id, name FROM products WHERE category_id = 3;
SELECT product_id, quantity FROM order_items WHERE order_id = 5 ORDER BY product_id;
SELECT order_id, count(*) FROM order_items GROUP BY order_id HAVING count(*) > 2;
SELECT p.id, p.price - 1.5 AS sale FROM products p WHERE p.id = 6;
SELECT id, price::int4 AS rounded FROM products WHERE id = 7;
SELECT id, CAST(stock AS numeric) / 2 FROM products WHERE category_id = 1;
SELECT id, name FROM products ORDER BY name LIMIT 3;
SELECT id FROM products WHERE price = 19.99;
SELECT id, name FROM products WHERE id = 3 AND category_id = 1;
SELECT * FROM order_items WHERE order_id = 1;
SELECT o.* FROM orders o WHERE o.id = 3;
SELECT o.id, c.* FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.id = 4;
SELECT p.name, r.rating FROM products p JOIN reviews r ON r.product_id = p.id WHERE r.rating >= 4 AND p.price < 30;
SELECT name FROM products WHERE name = lower(name);
SELECT id FROM products WHERE stock > 10 OR price > 100;
SELECT * FROM products WHERE price > (SELECT avg(price) FROM products);
SELECT name, price FROM products ORDER BY price DESC NULLS FIRST, id LIMIT 2;
SELECT customer_id, string_agg(status, ',') FROM orders GROUP BY customer_id;
SELECT customer_id, array_agg(id) FROM orders GROUP BY customer_id;
SELECT id, extract(year FROM placed_on) FROM orders;
SELECT id, placed_on + 1 FROM orders;
SELECT id FROM orders WHERE placed_on > current_date - 30;
-- ===================== forum =====================
SELECT id, name, slug FROM forums WHERE slug = 'general';
SELECT id, name FROM forums ORDER BY name;
SELECT t.id, t.title, t.reply_count FROM threads t WHERE t.forum_id = 1 ORDER BY t.pinned DESC, t.created_at DESC, t.id DESC LIMIT 10;
SELECT t.id, t.title FROM threads t WHERE t.forum_id = 2 AND t.pinned;
SELECT t.id, t.title, u.username FROM threads t JOIN users u ON u.id = t.author_id WHERE t.id = 3;
SELECT forum_id, count(*) AS threads, sum(reply_count) AS replies FROM threads GROUP BY forum_id;
SELECT f.name, count(t.id) FROM forums f LEFT JOIN threads t ON t.forum_id = f.id GROUP BY f.id, f.name;
SELECT p.id, p.body, u.username FROM posts p JOIN users u ON u.id = p.author_id WHERE p.thread_id = 2 ORDER BY p.created_at, p.id;
SELECT p.id, p.body FROM posts p WHERE p.thread_id = 1 ORDER BY p.id LIMIT 20;
SELECT p.id, p.body FROM posts p WHERE p.thread_id = 3 ORDER BY p.id DESC LIMIT 1;
SELECT thread_id, count(*) FROM posts GROUP BY thread_id;
SELECT thread_id, max(created_at) AS last_post FROM posts GROUP BY thread_id;
SELECT count(*) FROM posts WHERE thread_id = 2;
SELECT count(*) FROM posts WHERE author_id = 1 AND edited;
SELECT author_id, count(*) AS posts FROM posts GROUP BY author_id ORDER BY posts DESC, author_id LIMIT 5;
SELECT t.id, t.title, count(p.id) AS posts FROM threads t LEFT JOIN posts p ON p.thread_id = t.id WHERE t.forum_id = 1 GROUP BY t.id, t.title;
SELECT t.id, t.title, max(p.created_at) FROM threads t JOIN posts p ON p.thread_id = t.id GROUP BY t.id, t.title ORDER BY max(p.created_at) DESC, t.id LIMIT 5;
SELECT f.name, t.title, p.body FROM forums f JOIN threads t ON t.forum_id = f.id JOIN posts p ON p.thread_id = t.id WHERE f.id = 2;
SELECT u.username, count(DISTINCT p.thread_id) FROM users u JOIN posts p ON p.author_id = u.id GROUP BY u.id, u.username;
SELECT DISTINCT p.author_id FROM posts p WHERE p.thread_id = 4;
SELECT DISTINCT t.forum_id FROM threads t JOIN posts p ON p.thread_id = t.id WHERE p.author_id = 2;
SELECT id, title FROM threads WHERE title LIKE '%?%';
SELECT id, title FROM threads WHERE reply_count BETWEEN 1 AND 5 AND forum_id = 3;
SELECT id, title FROM threads WHERE reply_count = 0;
SELECT id, body FROM posts WHERE edited = false AND thread_id = 5;
SELECT id, length(body) AS len FROM posts WHERE thread_id = 1;
SELECT id, substr(body, 1, 10) AS preview FROM posts WHERE thread_id = 2;
SELECT id, trim(body) FROM posts WHERE thread_id = 3;
SELECT id, concat(body, '...') FROM posts WHERE thread_id = 4;
SELECT forum_id, avg(reply_count) FROM threads GROUP BY forum_id;
SELECT forum_id, min(created_at), max(created_at) FROM threads GROUP BY forum_id;
SELECT x.thread_id, x.n FROM (SELECT thread_id, count(*) AS n FROM posts GROUP BY thread_id) x WHERE x.n >= 3;
WITH busy AS (SELECT thread_id FROM posts GROUP BY thread_id HAVING count(*) > 2) SELECT t.title FROM threads t JOIN busy b ON b.thread_id = t.id;
SELECT id, title FROM threads WHERE forum_id = 1 UNION ALL SELECT id, title FROM threads WHERE pinned;
SELECT t.title, u.username FROM threads t, users u WHERE t.author_id = u.id AND t.forum_id = 2;
SELECT t.title, f.slug FROM threads t, forums f WHERE f.id = t.forum_id AND f.slug = 'help';
SELECT p.id FROM posts p, threads t, forums f WHERE p.thread_id = t.id AND t.forum_id = f.id AND f.id = 1;
SELECT id, title, CASE WHEN pinned THEN 1 ELSE 0 END FROM threads;
SELECT id, reply_count + 1 AS total_posts FROM threads WHERE id = 2;
SELECT count(*) FROM threads WHERE forum_id = 3 AND NOT pinned;
SELECT count(*) AS n FROM threads;
SELECT t.forum_id, count(*) FROM threads t WHERE t.author_id IN (1, 2, 3) GROUP BY t.forum_id;
SELECT id FROM threads WHERE NOT (pinned OR reply_count > 3);
SELECT id, title FROM threads WHERE created_at < '2024-02-15' ORDER BY created_at DESC, id LIMIT 3;
-- params: [1]
SELECT id, title FROM threads WHERE forum_id = $1 ORDER BY created_at DESC, id DESC LIMIT 5;
-- params: [2]
SELECT p.id, p.body, u.username FROM posts p JOIN users u ON u.id = p.author_id WHERE p.thread_id = $1;
SELECT id, body FROM posts WHERE thread_id = 1 AND id = 1 FOR SHARE;
SELECT id FROM posts WHERE body ~ 'abc';
SELECT id FROM posts WHERE body SIMILAR TO 'a%';
SELECT id, title FROM threads WHERE title = ANY(ARRAY['a', 'b']);
SELECT id FROM threads t WHERE reply_count > (SELECT avg(reply_count) FROM threads t2 WHERE t2.forum_id = t.forum_id);
SELECT thread_id, count(*) FROM posts GROUP BY thread_id ORDER BY count(*) DESC LIMIT 3 OFFSET 1;
SELECT id FROM posts INTERSECT SELECT id FROM threads;
SELECT lower(title) FROM threads GROUP BY lower(title);
-- ===================== pagination =====================
SELECT id, title FROM stories WHERE published ORDER BY score DESC, id LIMIT 5 OFFSET 5;
SELECT p.id, p.body FROM posts p WHERE p.thread_id = 1 ORDER BY p.id LIMIT 2 OFFSET 2;
SELECT id, name, price FROM products WHERE category_id = 2 ORDER BY price, id LIMIT 3 OFFSET 3;
SELECT o.id, o.total FROM orders o WHERE o.customer_id = 5 ORDER BY o.placed_on DESC, o.id LIMIT 2 OFFSET 1;
SELECT t.id, t.title FROM threads t ORDER BY t.reply_count DESC, t.id LIMIT 5 OFFSET 15;
SELECT story_id, count(*) AS n FROM votes GROUP BY story_id ORDER BY n DESC, story_id LIMIT 4 OFFSET 4;
-- ===================== semi-joins and null-safe tests =====================
SELECT s.id, s.title FROM stories s WHERE EXISTS (SELECT 1 FROM comments c WHERE c.story_id = s.id AND c.score > 5);
SELECT u.id, u.username FROM users u WHERE EXISTS (SELECT 1 FROM votes v WHERE v.user_id = u.id) AND u.karma > 10;
SELECT p.id, p.name FROM products p WHERE p.id IN (SELECT product_id FROM order_items WHERE quantity >= 3);
SELECT c.id, c.name FROM customers c WHERE c.id IN (SELECT customer_id FROM orders WHERE status = 'paid') ORDER BY c.id;
SELECT t.id, t.title FROM threads t WHERE t.forum_id = 2 AND EXISTS (SELECT 1 FROM posts p WHERE p.thread_id = t.id AND p.edited);
SELECT count(*) FROM stories s WHERE EXISTS (SELECT 1 FROM story_tags st WHERE st.story_id = s.id);
SELECT id FROM comments WHERE parent_id IS DISTINCT FROM 3;
SELECT id FROM comments WHERE score IS NOT DISTINCT FROM NULL;
SELECT id, published IS NOT TRUE AS hidden FROM stories WHERE author_id = 2;
SELECT id, (score > 5) IS TRUE AS good, (score > 5) IS UNKNOWN AS unscored FROM comments WHERE story_id = 2;
SELECT id FROM stories s WHERE NOT EXISTS (SELECT 1 FROM votes v WHERE v.story_id = s.id);
SELECT id FROM stories WHERE author_id NOT IN (SELECT id FROM users WHERE is_admin);
-- ===================== correlated aggregate subqueries (the Lobsters pattern) =====================
SELECT s.id, s.title, (SELECT count(*) FROM votes v WHERE v.story_id = s.id) AS votes FROM stories s WHERE s.author_id = 2;
SELECT s.id, (SELECT sum(v.value) FROM votes v WHERE v.story_id = s.id) AS score FROM stories s;
SELECT u.username, (SELECT max(c.created_at) FROM comments c WHERE c.author_id = u.id) AS last_comment FROM users u;
SELECT t.id, t.title, (SELECT count(*) FROM posts p WHERE p.thread_id = t.id AND p.edited) AS edited_posts FROM threads t WHERE t.forum_id = 1;
SELECT p.id, p.name, (SELECT avg(r.rating) FROM reviews r WHERE r.product_id = p.id) AS stars FROM products p WHERE p.category_id = 3;
SELECT c.id, (SELECT count(o.id) FROM orders o WHERE o.customer_id = c.id AND o.status = 'paid') FROM customers c;
SELECT score / 10 AS bucket, count(*) FROM stories GROUP BY score / 10 ORDER BY bucket;
SELECT lower(c.country) AS cc, count(*) FROM customers c GROUP BY lower(c.country);
SELECT length(username) AS len, count(*) FROM users WHERE is_admin = false GROUP BY 1;
-- ===================== views (inlined) =====================
SELECT id, title FROM popular_stories WHERE author = 'alice';
SELECT author, count(*) FROM popular_stories GROUP BY author;
SELECT p.id, p.title, p.score FROM popular_stories p ORDER BY p.score DESC, p.id LIMIT 3;
SELECT p.title, c.body FROM popular_stories p JOIN comments c ON c.story_id = p.id WHERE p.id = 3;
-- ===================== IN-list keys (one lookup per value, merged) =====================
SELECT id, title FROM stories WHERE author_id IN (1, 2, 3);
SELECT id, title FROM stories WHERE author_id IN (2, 4) ORDER BY id DESC LIMIT 4;
SELECT c.id, c.body FROM comments c WHERE c.story_id IN (1, 2, 3, 3) ORDER BY c.id;
SELECT story_id, count(*) FROM votes WHERE story_id IN (1, 5, 7) GROUP BY story_id;
SELECT DISTINCT user_id FROM votes WHERE story_id IN (2, 3);
SELECT u.username, s.title FROM users u JOIN stories s ON s.author_id = u.id WHERE u.id IN (1, 2) AND s.published;
-- params: [1, 3]
SELECT id, title, score FROM stories WHERE author_id IN ($1, $2) ORDER BY score DESC, id LIMIT 5;
SELECT count(*) FROM votes WHERE story_id IN (1, 2);
SELECT id FROM stories WHERE author_id IN (1, 2) ORDER BY created_at DESC, id LIMIT 3;
SELECT id FROM stories WHERE author_id IN (1, 2) ORDER BY id LIMIT 3 OFFSET 2;
SELECT id FROM stories WHERE author_id = 1 UNION ALL SELECT user_id FROM votes WHERE story_id = 2;
SELECT user_id, value FROM votes UNION ALL SELECT author_id, score FROM stories ORDER BY 1, 2 LIMIT 6;
SELECT id, price FROM products WHERE category_id = 1 UNION ALL SELECT id, total FROM orders WHERE customer_id = 2;
SELECT username AS name FROM users UNION ALL SELECT email FROM users WHERE email IS NOT NULL;
-- params: [2]
SELECT id, title FROM stories WHERE author_id = $1 UNION ALL SELECT c.id, c.body FROM comments c WHERE c.author_id = $1;
-- params: [3]
SELECT id FROM stories WHERE author_id = $1 UNION ALL SELECT story_id FROM votes WHERE user_id = $1 ORDER BY 1 DESC LIMIT 4;
SELECT s.id FROM stories s WHERE s.score > (SELECT count(*) FROM votes v WHERE v.story_id = s.id);
SELECT p.id, p.name FROM products p WHERE p.price > (SELECT avg(p2.price) FROM products p2 WHERE p2.category_id = p.category_id);
SELECT story_id, count(*) FILTER (WHERE value > 0) AS up, count(*) FILTER (WHERE value < 0) AS down FROM votes GROUP BY story_id;
SELECT count(*) FILTER (WHERE published) AS live, count(url) FILTER (WHERE score > 10), max(score) FILTER (WHERE NOT published) FROM stories;
SELECT customer_id, sum(total) FILTER (WHERE status = 'paid') AS paid, count(DISTINCT status) FILTER (WHERE total > 50) FROM orders GROUP BY customer_id;
SELECT id, name, price FROM products WHERE price > (SELECT avg(price) FROM products) ORDER BY price DESC, id;
SELECT id, (SELECT count(*) FROM votes) AS all_votes FROM stories WHERE id = 3;
SELECT u.username FROM users u WHERE u.karma >= (SELECT max(karma) FROM users WHERE NOT is_admin);
-- ===================== LIMIT / OFFSET parameters (SQLAlchemy style) =====================
-- params: [2, 3, 1]
SELECT id, title FROM stories WHERE author_id = $1 ORDER BY id DESC LIMIT $2 OFFSET $3;
-- params: [5]
SELECT id, name FROM products ORDER BY price DESC, id LIMIT $1;
-- params: [2]
SELECT id FROM threads ORDER BY created_at, id LIMIT 4 OFFSET $1;
-- params: [3, 2]
SELECT id, title FROM stories WHERE author_id IN (1, 2, 3) ORDER BY score DESC, id LIMIT $1 OFFSET $2;
SELECT author_id FROM stories UNION ALL SELECT user_id FROM votes UNION SELECT id FROM users ORDER BY 1 LIMIT 5;
SELECT country FROM customers UNION SELECT status FROM orders;
-- params: [2]
SELECT story_id FROM comments WHERE author_id = $1 UNION SELECT story_id FROM votes WHERE user_id = $1;
-- ===================== keys on expressions =====================
SELECT id, username FROM users WHERE lower(username) = 'alice';
-- params: ["bob"]
SELECT id, email FROM users WHERE lower(username) = $1;
SELECT id, title FROM stories WHERE score / 10 = 2 ORDER BY id;
SELECT count(*) FROM comments WHERE length(body) = 12;
SELECT id, strpos(title, 'a') AS at, position('o' IN title) FROM stories WHERE author_id = 1;
-- ===================== = ANY($1): lists passed as one array parameter =====================
-- params: [[1, 3, 5]]
SELECT id, title FROM stories WHERE id = ANY($1);
-- params: [[2, 4, null, 2]]
SELECT id, title, score FROM stories WHERE author_id = ANY($1) ORDER BY score DESC, id LIMIT 5;
-- params: [[1, 2, 3]]
SELECT author_id, count(*) AS n FROM stories WHERE author_id = ANY($1) GROUP BY author_id;
-- params: [[]]
SELECT id FROM stories WHERE author_id = ANY($1);
-- params: [["alice", "carol", "nobody"]]
SELECT id, username FROM users WHERE username = ANY($1::text[]);
-- params: [[3, 7], true]
SELECT c.id, c.body, u.username FROM comments c JOIN users u ON u.id = c.author_id WHERE c.story_id = ANY($1) AND u.is_admin = $2;
-- params: [[1, 2], 3]
SELECT id, title FROM stories WHERE author_id = ANY($1) ORDER BY id DESC LIMIT $2;
-- ===================== range parameters (cut by the host from the key's rows) =====================
-- params: [12]
SELECT id, title FROM stories WHERE id > $1 ORDER BY id LIMIT 5;
-- params: [25]
SELECT id, title FROM stories WHERE id < $1 ORDER BY id DESC LIMIT 4 OFFSET 1;
-- params: [3, 10]
SELECT id, score FROM stories WHERE author_id = $1 AND score >= $2 ORDER BY score DESC, id;
-- params: [5, 20]
SELECT id, score FROM stories WHERE score BETWEEN $1 AND $2;
-- params: [10, 3]
SELECT id, title FROM stories WHERE $1 < score ORDER BY score, id LIMIT $2;
-- params: [4]
SELECT story_id, count(*) AS n FROM votes WHERE story_id <= $1 GROUP BY story_id;
-- params: [20]
SELECT id, name, price FROM products WHERE price < $1 ORDER BY price, id;
-- params: ["m"]
SELECT id, username FROM users WHERE username >= $1;
-- params: [[1, 2, 3], 5]
SELECT id, author_id, score FROM stories WHERE author_id = ANY($1) AND score > $2 ORDER BY id LIMIT 6;
-- params: [null]
SELECT id FROM stories WHERE score > $1;
-- params: [2, 5]
SELECT c.id, c.body FROM comments c JOIN stories s ON s.id = c.story_id WHERE s.author_id = $1 AND c.score > $2;
-- ===================== range keys with equality keys (range-partial state per key value) =====================
-- params: [3, 5]
SELECT id, title, score FROM stories WHERE author_id = $1 AND id > $2 ORDER BY id LIMIT 3;
-- params: [2, 5, 25]
SELECT id, title FROM stories WHERE author_id = $1 AND id BETWEEN $2 AND $3;
-- params: [4, 40]
SELECT id, score FROM stories WHERE author_id = $1 AND published AND score < $2 ORDER BY score DESC, id LIMIT 2;
-- params: [3, 30]
SELECT id, body FROM comments WHERE story_id = $1 AND id >= $2 ORDER BY id;
-- params: [[1, 2], 10]
SELECT id, author_id FROM stories WHERE author_id = ANY($1) AND id > $2 ORDER BY id LIMIT 4;
-- params: [2, 3]
SELECT id, created_at FROM comments WHERE author_id = $1 AND score <= $2 ORDER BY created_at DESC, id LIMIT 3 OFFSET 1;
-- params: [2, 10]
SELECT count(*) FROM stories WHERE author_id = $1 AND score >= $2;
-- params: [1, 3]
SELECT p.id, p.thread_id FROM posts p JOIN threads t ON t.id = p.thread_id WHERE t.forum_id = $1 AND p.id > $2 ORDER BY p.id LIMIT 5;
-- ===================== aggregates over a range (the host aggregates the cut rows) =====================
-- params: [2, 10]
SELECT count(*), sum(score), avg(score) FROM stories WHERE author_id = $1 AND id >= $2;
-- params: [3, 5, 40]
SELECT min(score), max(title), count(url) FROM stories WHERE author_id = $1 AND score BETWEEN $2 AND $3;
-- params: [10]
SELECT count(*) AS n, sum(price) AS total FROM products WHERE price < $1;
-- params: [1, 1000000]
SELECT count(*), sum(score), max(id) FROM comments WHERE story_id = $1 AND id > $2;
-- params: [2, 5]
SELECT count(DISTINCT author_id), count(*) FILTER (WHERE score > 10) FROM comments WHERE story_id = $1 AND score >= $2;
-- params: [[1, 2, 3], 4]
SELECT author_id, count(*) AS n, max(score) FROM stories WHERE author_id = ANY($1) AND id > $2 GROUP BY author_id;
-- params: [[1, 2, 3, 4, 5], 3]
SELECT author_id, count(*) AS n FROM stories WHERE author_id = ANY($1) AND id > $2 GROUP BY author_id HAVING sum(score) > 40;
-- params: [2, 20]
SELECT count(*) AS n, avg(score) FROM comments WHERE story_id = $1 AND score < $2 HAVING count(*) >= 2;
-- params: [100]
SELECT count(*) AS n FROM products WHERE price < $1 HAVING max(stock) > 5 AND count(*) > 1;
-- params: [[1, 2, 3, 4, 5, 6, 7, 8], 2]
SELECT author_id, count(*) AS n FROM stories WHERE author_id = ANY($1) AND id > $2 GROUP BY author_id ORDER BY n DESC, author_id LIMIT 3;
-- params: [2, 3]
SELECT story_id, avg(score) FROM comments WHERE story_id = $1 AND score <= $2 GROUP BY story_id;
-- ===================== string_agg / array_agg with ORDER BY =====================
SELECT author_id, string_agg(title, ', ' ORDER BY id) AS titles FROM stories GROUP BY author_id;
-- params: [3]
SELECT s.id, string_agg(c.body, ' / ' ORDER BY c.created_at DESC, c.id) FROM stories s JOIN comments c ON c.story_id = s.id WHERE s.author_id = $1 GROUP BY s.id;
-- params: [2]
SELECT author_id, array_agg(score ORDER BY score DESC, id) AS scores FROM comments WHERE author_id = $1 GROUP BY author_id;
SELECT story_id, array_agg(tag_id ORDER BY tag_id) FROM story_tags GROUP BY story_id;
SELECT string_agg(name, ',' ORDER BY name) FILTER (WHERE id > 2) FROM tags;
SELECT o.customer_id, array_agg(o.total ORDER BY o.placed_on, o.id) FROM orders o GROUP BY o.customer_id;
SELECT p.category_id, string_agg(p.name, '; ' ORDER BY p.price DESC, p.id) FROM products p WHERE NOT p.discontinued GROUP BY p.category_id HAVING count(*) > 1;
-- params: [1]
SELECT t.id, string_agg(u.username, ', ' ORDER BY p.created_at, p.id) AS posters FROM threads t JOIN posts p ON p.thread_id = t.id JOIN users u ON u.id = p.author_id WHERE t.forum_id = $1 GROUP BY t.id;
SELECT array_agg(url ORDER BY id) FROM stories WHERE author_id = 1;
-- ===================== NOT EXISTS / NOT IN anti-joins (NULL semantics) =====================
SELECT s.id, s.title FROM stories s WHERE NOT EXISTS (SELECT 1 FROM comments c WHERE c.story_id = s.id);
-- params: [2]
SELECT s.id FROM stories s WHERE s.author_id = $1 AND NOT EXISTS (SELECT 1 FROM votes v WHERE v.story_id = s.id AND v.value < 0);
SELECT u.id, u.username FROM users u WHERE NOT EXISTS (SELECT 1 FROM stories s WHERE s.author_id = u.id AND s.published);
SELECT id FROM stories WHERE author_id NOT IN (SELECT user_id FROM votes WHERE value < 0);
SELECT id, parent_id FROM comments WHERE parent_id NOT IN (SELECT id FROM comments WHERE score > 15);
SELECT id FROM comments WHERE story_id NOT IN (SELECT parent_id FROM comments);
SELECT id FROM users WHERE id NOT IN (SELECT author_id FROM stories WHERE score > 1000);
SELECT p.id, p.name FROM products p WHERE NOT EXISTS (SELECT 1 FROM order_items oi WHERE oi.product_id = p.id) ORDER BY p.id;
-- ===================== HAVING on the grouping key =====================
-- params: [3]
SELECT story_id, count(*) FROM votes GROUP BY story_id HAVING story_id = $1;
-- params: [2]
SELECT story_id, sum(value) AS total FROM votes GROUP BY story_id HAVING story_id = $1 AND count(*) > 1;
SELECT author_id, count(*) FROM stories GROUP BY author_id HAVING author_id = 4;
-- ===================== window functions over the cache key's rows =====================
-- params: [2]
SELECT id, title, row_number() OVER (ORDER BY created_at DESC, id DESC) AS rn FROM stories WHERE author_id = $1 ORDER BY rn LIMIT 3;
-- params: [[1, 2, 3]]
SELECT id, author_id, rank() OVER (PARTITION BY author_id ORDER BY score DESC) AS r, lag(title) OVER (PARTITION BY author_id ORDER BY id) AS prev FROM stories WHERE author_id = ANY($1);
SELECT id, score, dense_rank() OVER (ORDER BY score DESC) FROM stories;
-- params: [3]
SELECT id, lead(score, 2) OVER (PARTITION BY story_id ORDER BY id) AS later, lag(id) OVER (ORDER BY id) FROM comments WHERE story_id = $1;
SELECT id, rank() OVER (ORDER BY price), dense_rank() OVER (ORDER BY category_id DESC) FROM products WHERE NOT discontinued;
-- params: [4]
SELECT p.id, row_number() OVER (ORDER BY p.id) FROM posts p WHERE p.thread_id = $1 ORDER BY 2 DESC LIMIT 2 OFFSET 1;
-- ===================== running aggregates over the cache key's rows =====================
-- params: [2]
SELECT id, score, sum(score) OVER (ORDER BY created_at, id) AS running, count(*) OVER (ORDER BY score) AS at_most FROM stories WHERE author_id = $1 ORDER BY id;
-- params: [4]
SELECT id, total, sum(total) OVER (ORDER BY placed_on) AS spent, avg(total) OVER () AS mean, count(total) OVER (ORDER BY placed_on) AS n FROM orders WHERE customer_id = $1 ORDER BY id;
-- params: [[1, 2, 3]]
SELECT id, product_id, avg(rating) OVER (PARTITION BY product_id) AS mean, min(rating) OVER (PARTITION BY product_id ORDER BY id ROWS UNBOUNDED PRECEDING) AS lowest FROM reviews WHERE product_id = ANY($1);
-- params: [3]
SELECT id, max(price) OVER (ORDER BY price DESC RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS top, sum(stock) OVER (ORDER BY price, id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cum_stock FROM products WHERE category_id = $1 ORDER BY id;
-- params: [2]
SELECT product_id, sum(quantity) OVER (ORDER BY product_id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM order_items WHERE order_id = $1;
SELECT id, sum(score) OVER (PARTITION BY author_id ORDER BY id) FROM stories ORDER BY id;
-- ===================== sliding ROWS frames over the cache key's rows =====================
-- params: [2]
SELECT id, score, avg(score) OVER (ORDER BY created_at, id ROWS BETWEEN 6 PRECEDING AND CURRENT ROW) AS week_avg, sum(score) OVER (ORDER BY id ROWS 2 PRECEDING) AS last3 FROM stories WHERE author_id = $1 ORDER BY id;
-- params: [4]
SELECT id, total, max(total) OVER (ORDER BY placed_on, id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS near_max, count(*) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND 3 FOLLOWING) AS next4 FROM orders WHERE customer_id = $1;
-- params: [[1, 2, 3]]
SELECT id, product_id, min(rating) OVER (PARTITION BY product_id ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 PRECEDING) AS prior_min FROM reviews WHERE product_id = ANY($1) ORDER BY id;
-- params: [3]
SELECT id, sum(score) OVER (ORDER BY score ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM comments WHERE story_id = $1;
SELECT id, sum(price) OVER (ORDER BY id RANGE BETWEEN 10 PRECEDING AND CURRENT ROW) FROM products WHERE category_id = 2;
-- ===================== float sum/avg over windows (PostgreSQL's additions, in window order) =====================
-- params: [4]
SELECT id, sum(total::float8) OVER (ORDER BY placed_on, id) AS spent, avg(total::float4) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING) AS near FROM orders WHERE customer_id = $1 ORDER BY id;
-- params: [2]
SELECT id, avg(score / 3.0::float8) OVER (ORDER BY id DESC ROWS 4 PRECEDING) AS recent FROM stories WHERE author_id = $1;
SELECT id, sum(total::float8) OVER () FROM orders WHERE customer_id = 4;
-- ===================== dates and times (TimeZone-independent forms) =====================
-- params: [2]
SELECT id, date_trunc('month', created_at) AS month, extract(year FROM created_at) AS y, extract(second FROM created_at) AS s FROM stories WHERE author_id = $1;
SELECT date_trunc('week', created_at) AS wk, count(*) FROM stories GROUP BY 1 ORDER BY 1;
-- params: [3]
SELECT author_id, date_trunc('month', created_at) AS month, count(*) FROM stories WHERE author_id = $1 GROUP BY author_id, date_trunc('month', created_at);
SELECT id FROM stories WHERE created_at >= timestamp '2024-02-01' + interval '1 month 3 days' ORDER BY id;
-- params: [4]
SELECT id, placed_on + 7 AS due, placed_on - date '2024-01-01' AS age, placed_on + interval '36 hours' AS later FROM orders WHERE customer_id = $1;
SELECT extract(dow FROM placed_on) AS dow, count(*) FROM orders GROUP BY 1;
-- params: [5]
SELECT id, created_at - timestamp '2024-01-01' AS since, extract(epoch FROM created_at) AS epoch FROM comments WHERE story_id = $1;
SELECT id, extract(isodow FROM created_at), extract(week FROM created_at), extract(doy FROM created_at), extract(quarter FROM created_at), extract(milliseconds FROM created_at) FROM threads;
SELECT id, created_at::date AS day, date_trunc('hour', created_at) - interval '30 minutes' FROM posts WHERE created_at < timestamp '2024-02-15' - interval '2 weeks';
-- ===================== jsonb operators =====================
-- params: [3]
SELECT id, data -> 'user' AS who, data ->> 'kind' AS kind, data -> 'tags' -> 0 AS first_tag, data #>> '{user,name}' AS name, data ->> 'n' AS n FROM activities WHERE user_id = $1;
-- params: ["vote"]
SELECT id, user_id FROM activities WHERE data ->> 'kind' = $1;
SELECT id FROM activities WHERE data @> '{"tags": ["rust"]}' ORDER BY id;
SELECT data ->> 'kind' AS kind, count(*) FROM activities WHERE data ? 'tags' GROUP BY 1;
SELECT id, data #> '{tags}' FROM activities WHERE data @> '{"n": 1}' AND NOT data <@ '{}';
-- ===================== AT TIME ZONE a full zone name =====================
-- params: [2]
SELECT id, created_at AT TIME ZONE 'Europe/Paris' AS paris FROM stories WHERE author_id = $1;
SELECT date_trunc('day', (created_at AT TIME ZONE 'America/New_York') AT TIME ZONE 'UTC') AS day, count(*) FROM comments GROUP BY 1;
SELECT id FROM orders WHERE placed_on::timestamp AT TIME ZONE 'Asia/Kolkata' > timestamptz '2024-02-01 00:00Z' ORDER BY id;
-- ===================== json_agg / jsonb_agg with ORDER BY =====================
-- params: [3]
SELECT author_id, json_agg(title ORDER BY id) AS titles, jsonb_agg(score ORDER BY score DESC, id) AS scores FROM stories WHERE author_id = $1 GROUP BY author_id;
SELECT o.customer_id, jsonb_agg(o.total ORDER BY o.placed_on, o.id) AS totals, json_agg(o.placed_on ORDER BY o.id) FROM orders o GROUP BY o.customer_id;
-- params: [2]
SELECT jsonb_agg(data ORDER BY id) FROM activities WHERE user_id = $1;
-- ===================== LEFT JOIN ON conditions reading the left side =====================
SELECT u.id, u.username, s.id AS story FROM users u LEFT JOIN stories s ON s.author_id = u.id AND u.karma > 10 AND s.published;
-- params: [2]
SELECT c.id, count(o.id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id AND c.vip WHERE c.id = $1 GROUP BY c.id;
SELECT t.id, p.id AS post FROM posts p RIGHT JOIN threads t ON p.thread_id = t.id AND NOT t.pinned AND p.edited;
-- ===================== CROSS and non-equality joins =====================
-- params: [3]
SELECT u.id, t.name FROM users u CROSS JOIN tags t WHERE u.id = $1;
SELECT c.name, t.name FROM categories c, tags t WHERE c.parent_id IS NULL;
SELECT p.id, q.id FROM products p JOIN products q ON q.price > p.price AND q.category_id = p.category_id WHERE p.id = 4;
SELECT s.id, count(c.id) FROM stories s JOIN comments c ON c.story_id = s.id AND c.created_at > s.created_at GROUP BY s.id;
SELECT u.id, s.id FROM users u LEFT JOIN stories s ON s.score > 55;
SELECT u.id, t.id FROM users u LEFT JOIN tags t ON u.is_admin AND t.name < 'r';
SELECT t.id, u.id FROM tags t RIGHT JOIN users u ON u.karma > 100;
SELECT u.id, t.id FROM users u LEFT JOIN tags t ON TRUE WHERE u.karma = 0;
-- params: [2]
SELECT o.id, p.id FROM orders o, products p WHERE o.customer_id = $1 AND p.price BETWEEN o.total / 4 AND o.total / 2;
-- ===================== IN / EXISTS under OR =====================
SELECT id FROM stories s WHERE s.score > 50 OR EXISTS (SELECT 1 FROM votes v WHERE v.story_id = s.id AND v.value < 0);
SELECT id FROM stories s WHERE s.published AND (s.author_id IN (SELECT id FROM users WHERE is_admin) OR s.score > 40);
SELECT c.id FROM comments c WHERE NOT (c.score > 5 OR EXISTS (SELECT 1 FROM votes v WHERE v.user_id = c.author_id));
SELECT u.id FROM users u WHERE u.karma > 100 OR u.id IN (SELECT author_id FROM comments WHERE score IS NULL);
-- params: [2]
SELECT t.id FROM threads t WHERE t.forum_id = $1 AND (t.pinned OR t.id IN (SELECT thread_id FROM posts WHERE edited));
-- ===================== json (not jsonb) operators: the document's text as written =====================
-- params: [3]
SELECT id, raw -> 'user' AS who, raw ->> 'kind' AS kind, raw -> 'tags' -> -1 AS last_tag, raw #>> '{user,name}' AS name, raw -> 'n' AS n, raw #> '{}' FROM activities WHERE user_id = $1;
-- params: ["view"]
SELECT id FROM activities WHERE raw ->> 'kind' = $1;
SELECT raw ->> 'kind' AS kind, count(*) FROM activities GROUP BY 1;
SELECT id, raw #> '{tags,0}', raw ->> 'tags' FROM activities WHERE raw -> 'user' ->> 'name' IS NOT NULL ORDER BY id;
-- ===================== array columns and operators =====================
SELECT id, name, labels FROM products WHERE labels @> '{sale}';
SELECT id, cardinality(labels), array_length(labels, 1) FROM products WHERE category_id = 2;
-- params: [3]
SELECT id FROM products WHERE category_id = $1 AND 'eco' = ANY(labels);
SELECT category_id, count(*) FROM products WHERE labels && '{new,eco}' GROUP BY category_id;
SELECT id FROM products WHERE NOT labels <@ '{new,sale}' ORDER BY id;
SELECT id FROM products WHERE stock = ANY('{0,3}');
-- ===================== IN (VALUES ...) of constants =====================
SELECT id, title FROM stories WHERE id IN (VALUES (1), (2), (5));
SELECT id FROM users WHERE username IN (VALUES ('alice'), ('bob')) AND karma >= 0;
SELECT p.id FROM products p WHERE p.category_id = ANY (VALUES (1), (3)) ORDER BY p.id;
SELECT id FROM orders WHERE status NOT IN (VALUES ('cancelled'), ('new'));
SELECT s.id, v.label FROM stories s JOIN (VALUES (1, 'one'), (2, 'two')) v(id, label) ON v.id = s.id;
-- ===================== date_trunc in a named zone =====================
SELECT id, date_trunc('day', created_at AT TIME ZONE 'UTC', 'America/New_York') AS day FROM stories WHERE author_id = 2;
SELECT date_trunc('month', created_at AT TIME ZONE 'UTC', 'Europe/Paris') AS m, count(*) FROM stories GROUP BY 1;
-- ===================== LEFT JOIN ON comparing both sides =====================
SELECT u.id, s.id FROM users u LEFT JOIN stories s ON s.author_id = u.id AND s.score > u.karma / 10;
SELECT c.id, count(o.id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id AND o.total > c.id * 10 GROUP BY c.id;
SELECT p.id, q.id FROM products p LEFT JOIN products q ON q.category_id = p.category_id AND q.price < p.price AND q.id <> p.id WHERE p.category_id = 3;
SELECT t.id, pp.id FROM posts pp RIGHT JOIN threads t ON pp.thread_id = t.id AND pp.created_at > t.created_at;
-- ===================== EXISTS in the select list =====================
-- params: [2]
SELECT s.id, s.title, EXISTS (SELECT 1 FROM votes v WHERE v.story_id = s.id AND v.user_id = $1) AS voted FROM stories s WHERE s.published;
SELECT t.id, EXISTS (SELECT 1 FROM posts p WHERE p.thread_id = t.id AND p.edited) AS has_edits FROM threads t ORDER BY t.id;
-- ===================== FULL JOIN, JOIN ... USING, NATURAL JOIN =====================
SELECT c.id, o.id, o.total FROM customers c FULL JOIN orders o ON o.customer_id = c.id;
SELECT coalesce(u.username, '?') AS name, count(s.id) FROM users u FULL OUTER JOIN stories s ON s.author_id = u.id GROUP BY 1;
-- params: [3]
SELECT order_id, product_id, quantity, p.name FROM order_items oi JOIN products p ON p.id = oi.product_id WHERE order_id = $1;
SELECT story_id, s.title, count(*) FROM votes v JOIN stories s ON s.id = v.story_id JOIN story_tags USING (story_id) GROUP BY story_id, s.title;
-- params: [2]
SELECT id, t.title, p.body FROM threads t JOIN posts p USING (id) WHERE t.forum_id = $1;
SELECT * FROM story_tags JOIN tags ON tags.id = story_tags.tag_id NATURAL JOIN (SELECT id AS story_id, title FROM stories) s;
SELECT id, c.name, o.status FROM customers c LEFT JOIN (SELECT customer_id AS id, status FROM orders) o USING (id) ORDER BY id;
SELECT category_id, c.name, p.name FROM (SELECT id AS category_id, name FROM categories) c RIGHT JOIN products p USING (category_id) WHERE p.stock > 0;
SELECT id, t.name, c.name FROM tags t FULL JOIN categories c USING (id);
-- ===================== correlated NOT IN (NULL semantics) =====================
SELECT s.id FROM stories s WHERE s.author_id NOT IN (SELECT c.author_id FROM comments c WHERE c.story_id = s.id);
-- params: [4]
SELECT id, score FROM comments c WHERE c.author_id = $1 AND c.score NOT IN (SELECT o.score FROM comments o WHERE o.parent_id = c.id);
SELECT t.id FROM threads t WHERE t.author_id NOT IN (SELECT p.author_id FROM posts p WHERE p.thread_id = t.id AND p.edited);
-- ===================== LATERAL correlated by equalities (top-n per row) =====================
SELECT u.id, s.title FROM users u CROSS JOIN LATERAL (SELECT title, score FROM stories s WHERE s.author_id = u.id ORDER BY score DESC, id LIMIT 3) s;
-- params: [2]
SELECT f.id, t.title FROM forums f, LATERAL (SELECT th.title FROM threads th WHERE th.forum_id = f.id ORDER BY th.created_at DESC, th.id LIMIT 5) t WHERE f.id = $1;
SELECT c.id, last.id, last.placed_on FROM customers c LEFT JOIN LATERAL (SELECT o.id, o.placed_on FROM orders o WHERE o.customer_id = c.id ORDER BY o.placed_on DESC, o.id DESC LIMIT 1) last ON true;
SELECT p.id, r.rating FROM products p JOIN LATERAL (SELECT rv.rating FROM reviews rv WHERE rv.product_id = p.id ORDER BY rv.rating DESC, rv.id LIMIT 2) r ON true WHERE p.category_id = 2;
-- ===================== VALUES as a FROM item =====================
SELECT p.id, p.name, w.weight FROM products p JOIN (VALUES (1, 0.5), (2, 1.5), (3, 2)) AS w(category_id, weight) ON w.category_id = p.category_id;
-- params: [1]
SELECT v.label, count(s.id) FROM (VALUES ('low', 0, 20), ('high', 21, 60)) AS v(label, lo, hi), stories s WHERE s.score BETWEEN v.lo AND v.hi AND s.author_id = $1 GROUP BY v.label;
-- ===================== $n parameters inside FROM subqueries (pulled up as keys) =====================
-- params: [2]
SELECT anon_1.id, anon_1.title FROM (SELECT stories.id AS id, stories.title AS title FROM stories WHERE stories.author_id = $1) AS anon_1 ORDER BY anon_1.id;
-- params: [3]
SELECT count(*) FROM (SELECT id FROM orders WHERE customer_id = $1 AND status <> 'cancelled') o;
-- params: [1]
SELECT t.id, t.title FROM (SELECT thread_id FROM posts WHERE author_id = $1) p JOIN threads t ON t.id = p.thread_id;
-- ===================== array subscripts =====================
SELECT id, labels[1] AS first_label FROM products WHERE category_id = 2;
SELECT labels[1], count(*) FROM products GROUP BY 1;
-- ===================== $n parameters inside IN / EXISTS subqueries (pulled up as keys) =====================
-- params: [3, 2]
SELECT s.* FROM stories s WHERE s.id = $1 AND EXISTS (SELECT 1 FROM votes v WHERE v.story_id = s.id AND v.user_id = $2);
-- params: [1, 2]
SELECT s.id, s.title FROM stories s WHERE s.author_id = $1 AND s.id IN (SELECT st.story_id FROM story_tags st WHERE st.tag_id = $2);
-- params: [4]
SELECT count(*) FROM stories s WHERE EXISTS (SELECT 1 FROM votes v WHERE v.story_id = s.id AND v.user_id = $1 AND v.value > 0);
-- params: [2, 3]
SELECT t.id, t.title FROM threads t WHERE t.forum_id = $1 AND EXISTS (SELECT 1 FROM posts p WHERE p.thread_id = t.id AND p.author_id = $2) ORDER BY t.id;
-- params: [5]
SELECT p.id, p.name FROM products p WHERE p.id IN (SELECT oi.product_id FROM order_items oi JOIN orders o ON o.id = oi.order_id WHERE o.customer_id = $1) ORDER BY p.id;
-- params: [4]
SELECT s.id FROM stories s WHERE NOT EXISTS (SELECT 1 FROM votes v WHERE v.story_id = s.id AND v.user_id = $1);

-- ===================== dates and times in the session TimeZone (the test's session: America/New_York) =====================
SELECT o.id, date_trunc('month', o.placed_on) AS month FROM orders o WHERE o.customer_id = 3;
SELECT o.customer_id, date_trunc('week', o.placed_on) AS wk, count(*) FROM orders o GROUP BY o.customer_id, date_trunc('week', o.placed_on);
SELECT s.id, s.created_at::timestamptz AS at, extract(hour FROM s.created_at::timestamptz) AS h FROM stories s WHERE s.author_id = 2;
SELECT s.id, (s.created_at::timestamptz + interval '1 month 1 day')::date AS due FROM stories s WHERE s.author_id = 4;
SELECT o.id, o.placed_on::timestamptz - interval '2 days' AS reminded FROM orders o WHERE o.placed_on >= '2024-02-01' AND o.customer_id = 5;
SELECT s.id FROM stories s WHERE s.created_at::timestamptz >= timestamptz '2024-03-10 02:30' ORDER BY s.id LIMIT 10;

-- ===================== array slices and ARRAY[...] constructors =====================
SELECT id, labels[1:2] AS first_two, labels[2:] FROM products WHERE category_id = 2;
SELECT p.id, ARRAY[p.id, p.category_id] AS ids, ARRAY[p.name, NULL] FROM products p WHERE p.category_id = 3;
SELECT id FROM products WHERE 'sale' = ANY(labels[:2]);

-- ===================== $n parameters inside NOT EXISTS (cut by the host) =====================
-- params: [4]
SELECT s.id, s.title FROM stories s WHERE NOT EXISTS (SELECT 1 FROM votes v WHERE v.story_id = s.id AND v.user_id = $1) ORDER BY s.id LIMIT 20;
-- params: [2, 3]
SELECT t.id FROM threads t WHERE t.forum_id = $1 AND NOT EXISTS (SELECT 1 FROM posts p WHERE p.thread_id = t.id AND p.author_id = $2);

-- ===================== LATERAL aggregates (one row for every outer row) =====================
SELECT u.id, x.n, x.best FROM users u, LATERAL (SELECT count(*) AS n, max(s.score) AS best FROM stories s WHERE s.author_id = u.id) x;
SELECT f.id, x.* FROM forums f CROSS JOIN LATERAL (SELECT count(*) AS threads, sum(t.reply_count) AS replies FROM threads t WHERE t.forum_id = f.id AND t.pinned) x;

-- ===================== $n parameters inside NOT IN (cut by the host, NULL semantics) =====================
-- params: [4]
SELECT s.id, s.title FROM stories s WHERE s.id NOT IN (SELECT v.story_id FROM votes v WHERE v.user_id = $1) ORDER BY s.id LIMIT 20;
-- params: [2, 3]
SELECT c.id FROM comments c WHERE c.story_id = $1 AND c.parent_id NOT IN (SELECT o.id FROM comments o WHERE o.author_id = $2);
-- params: [null]
SELECT u.id FROM users u WHERE u.id NOT IN (SELECT s.author_id FROM stories s WHERE s.score = $1);
-- params: [5]
SELECT s.id FROM stories s WHERE s.author_id NOT IN (SELECT c.author_id FROM comments c WHERE c.story_id = s.id AND c.score = $1);

-- ===================== textual timestamptz literals (read the same under every DateStyle) =====================
SELECT s.id FROM stories s WHERE s.created_at::timestamptz < 'Mar 15 2024 10:00 PM America/Los_Angeles' ORDER BY s.id LIMIT 10;
SELECT s.id FROM stories s WHERE s.created_at::timestamptz >= 'Fri, 01 Mar 2024 00:00:00 +0000' AND s.author_id = 2;
SELECT o.id FROM orders o WHERE o.placed_on::timestamptz < 'February 10, 2024 9:30 am';

-- ===================== textual timestamp (no time zone) literals (read the same under every DateStyle) =====================
SELECT s.id FROM stories s WHERE s.created_at < 'Mar 15 2024 10:00 PM' ORDER BY s.id LIMIT 10;
SELECT c.id FROM comments c WHERE c.created_at >= 'Fri, 01 Mar 2024 00:00:00' AND c.story_id = 3;
-- params: [2]
SELECT s.id, s.title FROM stories s WHERE s.author_id = $1 AND s.created_at BETWEEN 'February 10, 2024 9:30 am' AND 'June 1, 2024';
SELECT u.id FROM users u WHERE u.created_at > '15 January 2024 08:00:00.25 +02';
SELECT u.id FROM users u WHERE u.created_at > '01/15/2024';

-- ===================== a $n parameter tested by NOT IN (NULL semantics, cut by the host) =====================
-- params: [3]
SELECT s.id, s.title FROM stories s WHERE $1 NOT IN (SELECT v.user_id FROM votes v WHERE v.value < 0) ORDER BY s.id LIMIT 20;
-- params: [2, 1]
SELECT c.id FROM comments c WHERE $1 NOT IN (1, 3, 5) AND c.story_id = $2;
-- params: [null]
SELECT u.id FROM users u WHERE $1 NOT IN (SELECT s.author_id FROM stories s WHERE s.score > 10);
-- params: [4]
SELECT s.id FROM stories s WHERE $1 NOT IN (SELECT c.author_id FROM comments c WHERE c.story_id = s.id);

-- ===================== text under a libc collation (en_US.utf8, weir's glibc = the server's) =====================
SELECT c.id, c.name FROM contacts c ORDER BY c.name, c.id;
SELECT c.name, c.city FROM contacts c ORDER BY c.city DESC NULLS LAST, c.name LIMIT 5;
-- params: [3]
SELECT c.id, c.name FROM contacts c WHERE c.customer_id = $1 ORDER BY c.name DESC, c.id;
SELECT c.id FROM contacts c WHERE c.name > 'm' AND c.name <= 'Zoë';
SELECT c.id, c.name FROM contacts c WHERE c.city BETWEEN 'a' AND 'N' ORDER BY c.name, c.id;
SELECT c.id FROM contacts c WHERE c.city NOT BETWEEN 'b' AND 'M' OR c.name < c.city;
SELECT c.id, c.name, cu.name AS customer FROM contacts c JOIN customers cu ON cu.id = c.customer_id WHERE c.name >= 'é' ORDER BY c.name, c.id LIMIT 10;
-- params: [2]
SELECT c.name FROM contacts c WHERE c.customer_id = $1 AND c.name < 'Jo' ORDER BY c.name;
SELECT min(c.name), max(c.city) FROM contacts c;
-- params: ["m"]
SELECT c.id FROM contacts c WHERE c.name > $1;
SELECT string_agg(c.name, ', ' ORDER BY c.name) FROM contacts c;
-- upstream: an ICU collation (weir cannot prove its ICU equals the server's)
SELECT c.id, c.nick FROM contacts c ORDER BY c.nick, c.id;
SELECT c.id FROM contacts c WHERE c.nick < 'm';
-- ===================== windows partitioned within the key (top-N per group, per-group running totals) =====================
SELECT id, author_id, title, row_number() OVER (PARTITION BY author_id ORDER BY score DESC, id) AS rn FROM stories ORDER BY author_id, rn;
-- params: [3]
SELECT id, story_id, rank() OVER (PARTITION BY story_id ORDER BY score DESC NULLS LAST) AS r, count(*) OVER (PARTITION BY story_id, author_id) AS by_author FROM comments WHERE author_id = $1;
SELECT id, customer_id, status, sum(total) OVER (PARTITION BY customer_id ORDER BY placed_on, id) AS running, lag(total) OVER (PARTITION BY status ORDER BY id) AS prev_same_status FROM orders ORDER BY id;
SELECT id, category_id, price, max(price) OVER (PARTITION BY category_id) AS top, dense_rank() OVER (PARTITION BY category_id ORDER BY price DESC) AS price_rank FROM products WHERE NOT discontinued;
-- params: [2]
SELECT id, thread_id, row_number() OVER (PARTITION BY thread_id ORDER BY created_at, id) AS n FROM posts WHERE author_id = $1 ORDER BY thread_id, n;
SELECT c.id, c.city, row_number() OVER (PARTITION BY c.city ORDER BY c.id) AS n, count(*) OVER (PARTITION BY c.customer_id) AS per_customer FROM contacts c;
-- upstream: PARTITION BY a jsonb document (jsonb = compares numbers by value, 1.0 = 1)
SELECT id, count(*) OVER (PARTITION BY data) FROM activities;
-- ===================== POSIX regular expressions (the subset PostgreSQL and Python read alike) =====================
SELECT id, title FROM stories WHERE title ~ '^(How|Why) ' ORDER BY id;
SELECT id, username FROM users WHERE email !~ '@example\.com$';
SELECT id, name FROM products WHERE name ~ '[0-9]{2}$' AND category_id = 3;
-- params: [4]
SELECT id, body FROM posts WHERE thread_id = $1 AND body ~ '(rust|python|cache) (fast|help)?';
SELECT c.id FROM contacts c WHERE c.city ~ '^[A-Z]' AND c.name !~ 'o.?e';
-- upstream: locale-dependent classes, case folding under a libc collation
SELECT id FROM stories WHERE title ~ '[[:upper:]]\w+';
SELECT c.id FROM contacts c WHERE c.name ~* 'zoe';
-- ===================== RANGE / GROUPS offset frames and EXCLUDE (frames recomputed at the read) =====================
-- params: [2]
SELECT id, total, sum(total) OVER (ORDER BY id RANGE BETWEEN 5 PRECEDING AND 5 FOLLOWING) AS nearby FROM orders WHERE customer_id = $1 ORDER BY id;
SELECT id, score, count(*) OVER (ORDER BY score DESC RANGE BETWEEN CURRENT ROW AND 10 FOLLOWING) AS within10 FROM stories WHERE published;
-- params: [3]
SELECT id, avg(rating) OVER (ORDER BY rating GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE GROUP) AS others FROM reviews WHERE product_id = $1;
SELECT id, forum_id, max(reply_count) OVER (PARTITION BY forum_id ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 FOLLOWING EXCLUDE CURRENT ROW) AS best_other FROM threads;
SELECT product_id, quantity, min(quantity) OVER (ORDER BY quantity RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE TIES) FROM order_items WHERE order_id = 7;
-- ===================== RANGE offsets over dates and timestamps (interval distances in microseconds) =====================
SELECT id, count(*) OVER (ORDER BY placed_on RANGE BETWEEN interval '7 days' PRECEDING AND CURRENT ROW) FROM orders;
-- params: [3]
SELECT id, created_at, count(*) OVER (ORDER BY created_at RANGE BETWEEN interval '3 days' PRECEDING AND interval '1 day' FOLLOWING) AS nearby FROM stories WHERE author_id = $1;
SELECT id, placed_on, sum(total) OVER (PARTITION BY customer_id ORDER BY placed_on DESC RANGE BETWEEN '14 days' PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW) AS fortnight FROM orders;
-- params: [2]
SELECT id, max(reply_count) OVER (ORDER BY created_at RANGE BETWEEN interval '36 hours' PRECEDING AND interval '90 minutes' FOLLOWING) FROM threads WHERE forum_id = $1 ORDER BY id;
-- upstream: a month is calendar arithmetic
SELECT id, count(*) OVER (ORDER BY placed_on RANGE BETWEEN interval '1 month' PRECEDING AND CURRENT ROW) FROM orders;
-- ===================== SIMILAR TO (as the anchored regular expression PostgreSQL makes of it) =====================
SELECT id, title FROM stories WHERE title SIMILAR TO '%(rust|python)%';
SELECT id FROM users WHERE email NOT SIMILAR TO '_%@example.com';
-- ===================== $n NOT IN a subquery correlated by equalities (arrays per correlation value) =====================
-- params: [3]
SELECT s.id, s.title FROM stories s WHERE $1 NOT IN (SELECT v.user_id FROM votes v WHERE v.story_id = s.id AND v.value = 1) ORDER BY s.id;
-- params: [null]
SELECT t.id FROM threads t WHERE $1 NOT IN (SELECT p.author_id FROM posts p WHERE p.thread_id = t.id);
-- params: [5]
SELECT p.id FROM products p WHERE $1 NOT IN (SELECT r.rating FROM reviews r WHERE r.product_id = p.id) AND p.category_id = 2;
-- ===================== window min/max of text under a libc collation (en_US.utf8) =====================
SELECT c.id, c.name, min(c.name) OVER (PARTITION BY c.customer_id) AS first_name, max(c.city) OVER (ORDER BY c.id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS near_city FROM contacts c;
-- ===================== expressions over aggregates of a range (computed at the host) =====================
-- params: [2, 8]
SELECT coalesce(sum(score), 0) AS total, count(*) AS n, round(avg(score), 1) AS mean FROM stories WHERE author_id = $1 AND id >= $2;
-- params: [20]
SELECT count(*) > 0 AS any_recent, coalesce(max(total), 0) - coalesce(min(total), 0) AS spread FROM orders WHERE id < $1;
-- params: [[1, 2, 3], 10]
SELECT author_id, count(*) * 100 / nullif(count(url), 0) AS pct FROM stories WHERE author_id = ANY($1) AND score > $2 GROUP BY author_id;
-- ===================== INTERSECT / EXCEPT [ALL] (NULLs equal, multiset counts for ALL) =====================
SELECT author_id FROM stories INTERSECT SELECT user_id FROM votes;
SELECT author_id FROM stories INTERSECT ALL SELECT author_id FROM comments ORDER BY 1;
SELECT id FROM users EXCEPT SELECT author_id FROM stories ORDER BY 1;
SELECT story_id FROM votes EXCEPT ALL SELECT story_id FROM comments;
SELECT email FROM users INTERSECT SELECT email FROM users WHERE karma > 10;
SELECT country FROM customers EXCEPT ALL SELECT country FROM customers WHERE vip;
-- params: [3]
SELECT story_id FROM comments WHERE author_id = $1 INTERSECT SELECT story_id FROM votes WHERE user_id = $1 ORDER BY 1 LIMIT 5;
-- a range parameter inside each operand: every row kept, the host cuts each operand, then the EXCEPT
-- params: [2]
SELECT product_id FROM order_items WHERE quantity > $1 EXCEPT SELECT product_id FROM reviews WHERE rating < $1;
SELECT customer_id FROM orders UNION SELECT customer_id FROM reviews INTERSECT SELECT id FROM customers WHERE vip EXCEPT SELECT customer_id FROM orders WHERE status = 'cancelled';
(SELECT author_id, score FROM stories ORDER BY score DESC, id LIMIT 10) EXCEPT ALL (SELECT author_id, score FROM comments ORDER BY id LIMIT 20);
-- operands keyed on different parameters: each operand's own equality parameter is cut by the host
-- params: [1, 2]
SELECT story_id FROM comments WHERE author_id = $1 EXCEPT SELECT story_id FROM votes WHERE user_id = $2;
-- range, LIMIT/OFFSET and own equality parameters inside set-operation operands, = ANY keys under them
-- params: [20]
SELECT id FROM stories WHERE id > $1 UNION ALL SELECT id FROM comments WHERE id > $1;
-- params: [3, 4]
SELECT id FROM stories WHERE author_id = $1 AND id > $2 UNION SELECT story_id FROM comments WHERE author_id = $1 AND story_id > $2 ORDER BY 1;
-- params: [5]
(SELECT id, score FROM stories ORDER BY score DESC, id LIMIT $1) UNION ALL (SELECT id, score FROM comments ORDER BY id LIMIT $1) ORDER BY 1, 2;
-- params: [4, 2]
(SELECT author_id FROM stories ORDER BY id LIMIT $1 OFFSET $2) INTERSECT ALL SELECT user_id FROM votes ORDER BY 1;
-- params: [[1, 2, 3]]
SELECT story_id FROM comments WHERE author_id = ANY($1) UNION SELECT story_id FROM votes WHERE user_id = ANY($1);
-- params: [[2, 5, 7]]
SELECT story_id FROM comments WHERE author_id = ANY($1) INTERSECT ALL SELECT story_id FROM votes WHERE user_id = ANY($1) ORDER BY 1;
-- params: [2, 3]
SELECT story_id FROM comments WHERE author_id = $1 INTERSECT SELECT story_id FROM votes WHERE user_id = $2 ORDER BY 1;
-- params: [30, 3]
SELECT title FROM stories WHERE score >= $1 UNION SELECT body FROM comments WHERE story_id = $2 ORDER BY 1 LIMIT 5;
-- params: [10, 40, 1]
SELECT score FROM comments WHERE id BETWEEN $1 AND $2 EXCEPT ALL SELECT score FROM comments WHERE author_id = $3;
-- params: [[1, 2, 3]]
(SELECT id FROM stories WHERE author_id = ANY($1) ORDER BY id LIMIT 3) UNION ALL (SELECT id FROM comments WHERE author_id = ANY($1) ORDER BY id LIMIT 2);
-- a range parameter in a set operation nested in another: the host finishes the whole tree
-- params: [0]
SELECT id FROM stories UNION (SELECT story_id FROM votes WHERE value > $1 INTERSECT SELECT story_id FROM comments);
-- params: [[1, 2, 3, 4], 3]
SELECT story_id FROM votes WHERE user_id = ANY($1) EXCEPT ALL (SELECT story_id FROM comments WHERE author_id = ANY($1) UNION ALL SELECT id FROM stories WHERE author_id = ANY($1) ORDER BY 1 DESC LIMIT $2) ORDER BY 1;
-- ===================== DISTINCT and other groups over a range (the host groups the cut rows) =====================
-- params: [20]
SELECT DISTINCT author_id FROM stories WHERE score > $1;
-- params: [3, 12]
SELECT DISTINCT published FROM stories WHERE author_id = $1 AND id >= $2;
-- params: [5]
SELECT DISTINCT status FROM orders WHERE id < $1 ORDER BY status;
-- params: [15]
SELECT status, count(*), sum(total) FROM orders WHERE id > $1 GROUP BY status;
-- params: [[1, 2, 3], 10]
SELECT count(*), max(score) FROM stories WHERE author_id = ANY($1) AND score > $2;
-- params: [2, 3]
SELECT rating, count(*) AS n FROM reviews WHERE product_id > $1 AND rating >= $2 GROUP BY rating HAVING count(*) > 1 ORDER BY n DESC, rating LIMIT 3;
-- params: [10, 3, 1]
SELECT author_id, count(*) AS n FROM stories WHERE score > $1 GROUP BY author_id ORDER BY n DESC, author_id LIMIT $2 OFFSET $3;
-- upstream: numeric groups print as any of their equal values
-- params: [2]
SELECT DISTINCT unit_price FROM order_items WHERE quantity > $1;
-- ===================== LIMIT parameters: top-k state per key (the top rows of the largest page asked) =====================
-- params: [3, 5]
SELECT id, title, score FROM stories WHERE author_id = $1 ORDER BY score DESC, id LIMIT $2;
-- params: [2, 10, 5]
SELECT id, body FROM posts WHERE thread_id = $1 ORDER BY created_at, id LIMIT $2 OFFSET $3;
-- params: [[1, 2, 3], 4]
SELECT id, name, price FROM products WHERE category_id = ANY($1) ORDER BY stock DESC, id LIMIT $2;
-- params: [20]
SELECT id, title FROM threads ORDER BY created_at DESC, id LIMIT $1;
-- params: [4, 3]
SELECT s.id, s.title, u.username FROM stories s JOIN users u ON u.id = s.author_id WHERE s.author_id = $1 ORDER BY s.created_at DESC, s.id LIMIT $2;
-- every row of the key (a nullable leading ORDER BY column under an explicit DESC NULLS LAST), the host cuts the page
-- params: [3, 5]
SELECT id, body FROM comments WHERE story_id = $1 ORDER BY score DESC NULLS LAST, id LIMIT $2;
-- top rows on a nullable leading ORDER BY column whose NULLs the WHERE rejects
-- params: [3, 5]
SELECT id, body FROM comments WHERE story_id = $1 AND score IS NOT NULL ORDER BY score DESC, id LIMIT $2;
-- params: [4, 2]
SELECT id, story_id, score FROM comments WHERE score >= 2 ORDER BY score, id LIMIT $1 OFFSET $2;
-- top rows on a column shifted by a constant (x + c descending, x - c ascending: any overflow is on the first rows)
-- params: [3, 5]
SELECT id, title FROM stories WHERE author_id = $1 ORDER BY score + 1 DESC, id LIMIT $2;
-- params: [2, 4, 2]
SELECT id, body FROM posts WHERE thread_id = $1 ORDER BY id - 1 LIMIT $2 OFFSET $3;
-- every row of the key: x + c ascending may overflow on a row past the page
-- params: [3, 5]
SELECT id, title FROM stories WHERE author_id = $1 ORDER BY score + 1, id LIMIT $2;
-- ===================== LIMIT parameters over a nullable leading ORDER BY column: top rows, NULL the point past every value =====================
-- params: [3, 5]
SELECT id, body, score FROM comments WHERE story_id = $1 ORDER BY score DESC, id LIMIT $2;
-- params: [6, 4]
SELECT id, score FROM comments ORDER BY score, id LIMIT $1 OFFSET $2;
-- params: [2, 8]
SELECT id, parent_id FROM comments WHERE story_id = $1 ORDER BY parent_id, id LIMIT $2;
-- params: [[1, 2, 3], 6]
SELECT id, parent_id FROM comments WHERE story_id = ANY($1) ORDER BY parent_id DESC NULLS FIRST, id LIMIT $2;
-- params: [3, 4]
SELECT c.id, u.username, c.score FROM comments c JOIN users u ON u.id = c.author_id WHERE c.story_id = $1 ORDER BY c.score DESC, c.id LIMIT $2;
-- params: [3]
SELECT id, name FROM categories ORDER BY parent_id DESC, id LIMIT $1;
-- every row of the key: an explicit ASC NULLS FIRST (NULL is kept past every value only)
-- params: [2, 5]
SELECT id, body FROM comments WHERE story_id = $1 ORDER BY score NULLS FIRST, id LIMIT $2;
-- ===================== range and top-k keys on the other table of a join (pieces per join value) =====================
-- params: ["alice", 2]
SELECT s.id, s.title FROM stories s JOIN users u ON u.id = s.author_id WHERE u.username = $1 AND s.id > $2 ORDER BY s.id LIMIT 20;
-- params: ["bob", 5]
SELECT s.id, s.score FROM users u JOIN stories s ON s.author_id = u.id WHERE u.username = $1 ORDER BY s.score DESC, s.id LIMIT $2;
-- params: ["help", 3, 10]
SELECT t.id, t.title FROM threads t JOIN forums f ON f.id = t.forum_id WHERE f.slug = $1 AND t.id >= $2 ORDER BY t.id LIMIT $3;
-- params: ["general", 4]
SELECT t.id, t.title, t.created_at FROM forums f JOIN threads t ON t.forum_id = f.id WHERE f.slug = $1 ORDER BY t.created_at DESC, t.id LIMIT $2;
-- ===================== ranges on the right side of a LEFT JOIN (the cut rejects the padded rows: inner for the statement) =====================
-- params: [5]
SELECT c.name, o.id FROM customers c LEFT JOIN orders o ON o.customer_id = c.id WHERE o.id >= $1 ORDER BY o.id LIMIT 10;
-- params: ["alice", 40]
SELECT u.username, s.id FROM users u LEFT JOIN stories s ON s.author_id = u.id WHERE u.username = $1 AND s.id < $2 ORDER BY s.id DESC LIMIT 5;
-- ===================== range keys under joins (filled intervals of one joined table's column) =====================
-- params: [10]
SELECT s.id, u.username FROM stories s JOIN users u ON u.id = s.author_id WHERE s.id > $1 ORDER BY s.id LIMIT 20;
-- params: [3, 5, 10]
SELECT p.id, u.username, p.body FROM posts p JOIN users u ON u.id = p.author_id WHERE p.thread_id = $1 AND p.id > $2 ORDER BY p.id LIMIT $3;
-- params: [5, 30]
SELECT o.id, c.name, o.total FROM orders o LEFT JOIN customers c ON c.id = o.customer_id WHERE o.id BETWEEN $1 AND $2 ORDER BY o.id;
-- params: [40]
SELECT t.title, f.name FROM forums f JOIN threads t ON t.forum_id = f.id WHERE t.id < $1 ORDER BY t.id DESC LIMIT 10;
-- params: [2, 8]
SELECT v.id, s.title FROM votes v JOIN stories s ON s.id = v.story_id WHERE v.user_id = $1 AND v.id >= $2 ORDER BY v.id LIMIT 5;
