-- Corpus schema: a news site, a shop and a forum (tests/integration/test_corpus.py).
CREATE TABLE users (id int4 PRIMARY KEY, username text NOT NULL, email varchar(100),
                    karma int4 NOT NULL, is_admin bool NOT NULL, created_at timestamp NOT NULL);
CREATE TABLE stories (id int8 PRIMARY KEY, author_id int4 NOT NULL, title text NOT NULL,
                      url text, score int4 NOT NULL, published bool NOT NULL,
                      created_at timestamp NOT NULL);
CREATE TABLE comments (id int8 PRIMARY KEY, story_id int8 NOT NULL, author_id int4 NOT NULL,
                       parent_id int8, body text NOT NULL, score int4, created_at timestamp NOT NULL);
CREATE TABLE votes (id int8 PRIMARY KEY, story_id int8 NOT NULL, user_id int4 NOT NULL,
                    value int2 NOT NULL);
CREATE TABLE tags (id int4 PRIMARY KEY, name text NOT NULL);
CREATE TABLE story_tags (story_id int8, tag_id int4, PRIMARY KEY (story_id, tag_id));
CREATE TABLE customers (id int4 PRIMARY KEY, name text NOT NULL, country text, vip bool NOT NULL);
CREATE TABLE categories (id int4 PRIMARY KEY, name text NOT NULL, parent_id int4);
CREATE TABLE products (id int4 PRIMARY KEY, category_id int4 NOT NULL, name text NOT NULL,
                       price numeric(10,2) NOT NULL, stock int4 NOT NULL, discontinued bool NOT NULL,
                       labels text[]);
CREATE TABLE orders (id int8 PRIMARY KEY, customer_id int4 NOT NULL, status text NOT NULL,
                     total numeric(12,2), placed_on date NOT NULL);
CREATE TABLE order_items (order_id int8, product_id int4, quantity int4 NOT NULL,
                          unit_price numeric(10,2) NOT NULL, PRIMARY KEY (order_id, product_id));
CREATE TABLE reviews (id int4 PRIMARY KEY, product_id int4 NOT NULL, customer_id int4 NOT NULL,
                      rating int2 NOT NULL, body text);
CREATE TABLE forums (id int4 PRIMARY KEY, name text NOT NULL, slug text NOT NULL);
CREATE TABLE threads (id int4 PRIMARY KEY, forum_id int4 NOT NULL, title text NOT NULL,
                      author_id int4 NOT NULL, pinned bool NOT NULL, reply_count int4 NOT NULL,
                      created_at timestamp NOT NULL);
CREATE VIEW popular_stories AS
    SELECT s.id, s.title, s.score, u.username AS author FROM stories s
    JOIN users u ON u.id = s.author_id WHERE s.score > 20;
CREATE TABLE posts (id int8 PRIMARY KEY, thread_id int4 NOT NULL, author_id int4 NOT NULL,
                    body text NOT NULL, edited bool NOT NULL, created_at timestamp NOT NULL);
CREATE TABLE activities (id int4 PRIMARY KEY, user_id int4 NOT NULL, data jsonb, raw json);
CREATE TABLE contacts (id int4 PRIMARY KEY, customer_id int4 NOT NULL,
                       name text COLLATE "en_US.utf8" NOT NULL, city text COLLATE "en_US.utf8",
                       nick text COLLATE "en-x-icu");
